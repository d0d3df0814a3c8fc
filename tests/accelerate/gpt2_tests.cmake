# GPT-2 data-parallel (included from accelerator_tests.cmake): examples/gpt2 under
# `brisk launch -n 2` with batch 4 per process gives the losses of one process with batch 8
# as does one process with batch 4 and 2 accumulation steps (run_gpt2_dp.sh compares their metrics.jsonl).
if(BRISK_HAVE_MPI AND BRISK_BUILD_EXAMPLES)  # gpt2 is defined later, in examples/
  add_test(NAME accelerate.mp.gpt2_dp.np2
    COMMAND ${BRISK_TEST_JOB} --timeout 280 --grep "GPT2-DP-OK"
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_gpt2_dp.sh $<TARGET_FILE:gpt2> $<TARGET_FILE:brisk_cli>
      ${BRISK_TEST_JOB} ${CMAKE_CURRENT_BINARY_DIR}/accelerate_gpt2_dp)
  set_tests_properties(accelerate.mp.gpt2_dp.np2 PROPERTIES LABELS "multiprocess" RESOURCE_LOCK cpu_cores
    TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
# --resume from a step-10 checkpoint logs the straight run's losses for steps 11-20 (one process).
if(BRISK_BUILD_EXAMPLES)
  add_test(NAME accelerate.gpt2_resume
    COMMAND ${BRISK_TEST_JOB} --timeout 110 --grep "GPT2-RESUME-OK"
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_gpt2_resume.sh $<TARGET_FILE:gpt2>
      ${CMAKE_CURRENT_BINARY_DIR}/accelerate_gpt2_resume)
  set_tests_properties(accelerate.gpt2_resume PROPERTIES LABELS "unit" TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
