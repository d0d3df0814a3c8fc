# `brisk config --interactive` with answers piped in: Enter keeps a default, a bad answer is
# explained and asked again, and the file holds the answers.
# Inputs: BRISK, WORK_DIR.
file(MAKE_DIRECTORY ${WORK_DIR})
set(cfg ${WORK_DIR}/interactive.yaml)
file(REMOVE ${cfg})
# kind, machines (Enter = 1), processes, use_cpu is implied by MULTI_CPU, mixed precision (bad, then bf16), debug (Enter)
file(WRITE ${WORK_DIR}/answers.txt "multi_cpu\n\n3\nfp9\nbf16\n\n")
execute_process(COMMAND ${BRISK} config --interactive --config_file ${cfg}
  INPUT_FILE ${WORK_DIR}/answers.txt RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "brisk config --interactive exited ${rc}:\n${out}\n${err}")
endif()
if(NOT out MATCHES "mixed_precision: 'fp9' is not valid; expected one of: no, fp16, bf16")
  message(FATAL_ERROR "the bad answer was not explained:\n${out}")
endif()
file(READ ${cfg} text)
foreach(line "distributed_type: MULTI_CPU" "num_machines: 1" "num_processes: 3" "mixed_precision: bf16"
             "use_cpu: true" "debug: false")
  string(FIND "${text}" "${line}\n" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "'${line}' missing from the written config:\n${text}")
  endif()
endforeach()
message(STATUS "interactive config ok:\n${text}")
