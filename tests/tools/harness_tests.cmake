# The test harness's own tests (included from tests/CMakeLists.txt). Each deliberately broken
# job below goes through brisk_test_job exactly as the real multi-process tests do, and is
# registered with WILL_FAIL: CTest passes it only because brisk_test_job failed it. A "why" twin
# runs the same job inside a second brisk_test_job that expects the failure and checks its
# stated reason, so none of them can pass for the wrong reason (say, a missing program).
set(_bad $<TARGET_FILE:brisk_test_bad_rank>)

add_test(NAME harness.ranks_missing.will_fail
  COMMAND ${BRISK_TEST_JOB} --ranks 2 --grep "PASS bad_rank good" -- ${BRISK_TEST_JOB} --rank -- ${_bad} good)
set_tests_properties(harness.ranks_missing.will_fail PROPERTIES LABELS "unit" WILL_FAIL TRUE TIMEOUT 60)
add_test(NAME harness.ranks_missing.why
  COMMAND ${BRISK_TEST_JOB} --expect fail --grep "FAIL: rank 1 never reported its exit status"
    -- ${BRISK_TEST_JOB} --ranks 2 -- ${BRISK_TEST_JOB} --rank -- ${_bad} good)
set_tests_properties(harness.ranks_missing.why PROPERTIES LABELS "unit" TIMEOUT 60)
add_test(NAME harness.exit_code_is_checked_with_the_output.will_fail
  COMMAND ${BRISK_TEST_JOB} --grep "PASS" -- sh -c "echo PASS; exit 3")
set_tests_properties(harness.exit_code_is_checked_with_the_output.will_fail PROPERTIES LABELS "unit" WILL_FAIL TRUE
  TIMEOUT 60)

# No test may pass on a regular expression alone, and every multi-process or example test runs
# through brisk_test_job (checked on this build's own test list, and on lists that break it).
add_executable(brisk_test_check_tests ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_tests.cpp)
target_link_libraries(brisk_test_check_tests PRIVATE brisk::brisk brisk_options)
add_test(NAME harness.every_test_is_judged_by_exit_status
  COMMAND brisk_test_check_tests --ctest ${CMAKE_CTEST_COMMAND} --build-dir ${PROJECT_BINARY_DIR})
set_tests_properties(harness.every_test_is_judged_by_exit_status PROPERTIES LABELS "unit" TIMEOUT 120)
foreach(bad regex_only multiprocess_without_runner)
  add_test(NAME harness.check_tests_rejects_${bad}.will_fail
    COMMAND brisk_test_check_tests ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_tests_${bad}.json)
  set_tests_properties(harness.check_tests_rejects_${bad}.will_fail PROPERTIES LABELS "unit" WILL_FAIL TRUE
    TIMEOUT 60)
endforeach()

if(BRISK_HAVE_MPI)
  # name, bad_rank mode, time limit (s), the reason brisk_test_job must give.
  set(_cases
    "rank_fails|fail|60|FAIL: rank 1 ended with exit 1"
    "rank_hangs|hang|4|FAIL: the job did not finish within its time limit of 4 s"
    "rank_leaves_a_child|orphan|60|process.es. of the job left behind after it ended")
  foreach(c ${_cases})
    string(REPLACE "|" ";" parts "${c}")
    list(GET parts 0 name)
    list(GET parts 1 mode)
    list(GET parts 2 limit)
    list(GET parts 3 why)
    set(opts --timeout ${limit})
    # Rank 0 prints the success line every time: only the other rank's misbehaviour fails it.
    add_test(NAME harness.mp.${name}.will_fail
      COMMAND ${BRISK_TEST_JOB} --np 2 ${opts} --grep "PASS bad_rank ${mode} rank 0" -- ${_bad} ${mode})
    add_test(NAME harness.mp.${name}.why
      COMMAND ${BRISK_TEST_JOB} --expect fail --timeout 60 --grep "PASS bad_rank ${mode} rank 0" --grep "${why}"
        -- ${BRISK_TEST_JOB} --np 2 ${opts} --grep "PASS bad_rank ${mode} rank 0" -- ${_bad} ${mode})
    set_tests_properties(harness.mp.${name}.will_fail PROPERTIES WILL_FAIL TRUE)
    set_tests_properties(harness.mp.${name}.will_fail harness.mp.${name}.why PROPERTIES LABELS "multiprocess"
      RESOURCE_LOCK cpu_cores TIMEOUT 90 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
  endforeach()
  # A time-out reports the hanging program's thread stacks (gdb attached before the kill).
  find_program(BRISK_GDB gdb)
  if(BRISK_GDB)
    add_test(NAME harness.mp.rank_hangs.stacks
      COMMAND ${BRISK_TEST_JOB} --expect fail --timeout 90 --grep "--- stacks of [0-9]+ [^ ]*bad_rank hang"
        --grep "Thread 1 " -- ${BRISK_TEST_JOB} --np 2 --timeout 4 -- ${_bad} hang)
    set_tests_properties(harness.mp.rank_hangs.stacks PROPERTIES LABELS "multiprocess" RESOURCE_LOCK cpu_cores
      TIMEOUT 120 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
  endif()
  # The control: the same job with well-behaved ranks passes.
  add_test(NAME harness.mp.good_ranks
    COMMAND ${BRISK_TEST_JOB} --np 2 --timeout 60 --grep "PASS bad_rank good rank 0" -- ${_bad} good)
  set_tests_properties(harness.mp.good_ranks PROPERTIES LABELS "multiprocess" RESOURCE_LOCK cpu_cores TIMEOUT 90
    ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
endif()
