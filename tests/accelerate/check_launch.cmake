# `brisk launch` end to end with a config written by `brisk config`: settings reach every rank,
# a rank's exit status becomes the launch's, and the other ranks are stopped rather than waited for.
# Inputs: BRISK (the brisk executable), PROGRAM (brisk_test_rank_exit), CONFIG (a config file; empty
# in a build that reads no YAML, which passes the same setting as a flag instead).
if(CONFIG)
  set(settings --config_file ${CONFIG})
else()
  set(settings --mixed_precision bf16)
endif()
execute_process(COMMAND ${BRISK} launch ${settings} -n 2 ${PROGRAM} -1 0 0
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a passing 2-process launch exited ${rc}:\n${out}\n${err}")
endif()
foreach(rank 0 1)
  if(NOT out MATCHES "rank ${rank} of 2: BRISK_MIXED_PRECISION=bf16 BRISK_LAUNCHED=1")
    message(FATAL_ERROR "rank ${rank} did not see the config's mixed_precision:\n${out}")
  endif()
endforeach()

# A flag overrides the config file.
execute_process(COMMAND ${BRISK} launch ${settings} -n 2 --mixed-precision fp16 ${PROGRAM} -1 0 0
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0 OR NOT out MATCHES "rank 1 of 2: BRISK_MIXED_PRECISION=fp16")
  message(FATAL_ERROR "--mixed-precision fp16 did not override the config (${rc}):\n${out}\n${err}")
endif()

# Rank 1 exits 3 at once; rank 0 would sleep 40 s.
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${BRISK} launch ${settings} -n 2 ${PROGRAM} 1 3 40
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
if(NOT rc EQUAL 3)
  message(FATAL_ERROR "rank 1 exited 3 but brisk launch exited '${rc}':\n${out}\n${err}")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the job took ${seconds} s after rank 1 failed: rank 0 was not stopped")
endif()

# One process runs directly (no mpirun) and still forwards the exit status and settings.
execute_process(COMMAND ${BRISK} launch ${settings} -n 1 ${PROGRAM} 0 5 0
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 5 OR NOT out MATCHES "BRISK_MIXED_PRECISION=bf16 BRISK_LAUNCHED=1")
  message(FATAL_ERROR "brisk launch -n 1: expected exit 5 and the settings, got ${rc}:\n${out}\n${err}")
endif()
message(STATUS "launch ok: settings forwarded, flag over config, exit 3 in ${seconds} s, -n 1 direct")
