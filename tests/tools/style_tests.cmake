# Checks of the source tree itself (included from tests/CMakeLists.txt), label `unit`.
# No function in the libraries, the CLI or the examples is longer than 120 lines unless
# scripts/function-length.allow says why (scripts/function-length.py; docs/testing.md). The two
# fixtures show that the check can fail: a 121-line function is caught (and named), and a
# 120-line one with braces hidden in strings, comments and preprocessor branches is measured as
# exactly 120 and passes.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  set(_check ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/function-length.py)
  set(_fixtures ${CMAKE_CURRENT_SOURCE_DIR}/tools/function_length)
  add_test(NAME style.function_length COMMAND ${_check})
  add_test(NAME style.function_length_catches_a_long_function
    COMMAND ${BRISK_TEST_JOB} --exit-code 1 --grep "over_limit.cpp:3: long_function is 121 lines, over the limit of 120"
      -- ${_check} --allow /dev/null ${_fixtures}/over_limit.cpp)
  add_test(NAME style.function_length_measures_to_the_line
    COMMAND ${BRISK_TEST_JOB} --grep "120  tests/tools/function_length/at_limit.cpp:12  at_limit_function"
      --grep "none over 120 lines" -- ${_check} --allow /dev/null --list ${_fixtures}/at_limit.cpp)
  set_tests_properties(style.function_length style.function_length_catches_a_long_function
    style.function_length_measures_to_the_line PROPERTIES LABELS "unit" TIMEOUT 120)
else()
  message(STATUS "brisk: no Python 3 interpreter: no style.function_length test")
endif()
