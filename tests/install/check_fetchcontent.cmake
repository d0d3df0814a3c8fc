# Configures, builds and runs tests/install/fetchcontent_consumer with brisk built inside it
# (HOW = fetchcontent or add_subdirectory), then runs the consumer program.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}
  -DBRISK_SOURCE_DIR=${BRISK_SOURCE_DIR} -DBRISK_HOW=${HOW} -DCMAKE_BUILD_TYPE=Release
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the ${HOW} consumer failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR} -j 2 --target consumer RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the ${HOW} consumer failed (${rc})")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer said: ${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "consumer ok")
  message(FATAL_ERROR "the ${HOW} consumer program failed (${rc}): ${out}")
endif()
