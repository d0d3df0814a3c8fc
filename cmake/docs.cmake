# `docs`: the API reference of the public headers with Doxygen, into <build>/docs/api/html
# (docs/api-reference.md). The target exists only when doxygen is found (Debian: doxygen).
find_package(Doxygen QUIET)
if(NOT DOXYGEN_FOUND)
  message(STATUS "brisk: doxygen not found; no `docs` target (Debian/Ubuntu: apt-get install doxygen)")
  return()
endif()
set(BRISK_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs/api)
set(BRISK_DOCS_INPUT ${PROJECT_SOURCE_DIR}/include)
set(BRISK_DOCS_INCLUDE_DIRS ${PROJECT_SOURCE_DIR}/include)
foreach(lib util core kernels autograd nn optim amp data models dist accelerate)
  string(APPEND BRISK_DOCS_INPUT " ${PROJECT_SOURCE_DIR}/${lib}/include/brisk")
  string(APPEND BRISK_DOCS_INCLUDE_DIRS " ${PROJECT_SOURCE_DIR}/${lib}/include")
endforeach()
set(BRISK_DOCS_FILTER "sh ${PROJECT_SOURCE_DIR}/docs/api/comment_filter.sh")
configure_file(${PROJECT_SOURCE_DIR}/docs/api/Doxyfile.in ${BRISK_DOCS_OUTPUT}/Doxyfile @ONLY)
add_custom_target(docs
  COMMAND ${CMAKE_COMMAND} -E make_directory ${BRISK_DOCS_OUTPUT}
  COMMAND ${DOXYGEN_EXECUTABLE} ${BRISK_DOCS_OUTPUT}/Doxyfile
  COMMAND ${CMAKE_COMMAND} -E echo "API reference: ${BRISK_DOCS_OUTPUT}/html/index.html"
  WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
  COMMENT "Doxygen: the API reference of the public headers"
  VERBATIM)
