# The Trainer's data-parallel test (included from accelerator_tests.cmake): trainer_worker trains on
# N processes and checks the result against one process with an N times larger batch.
add_executable(trainer_worker ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/trainer_worker.cpp)
target_link_libraries(trainer_worker PRIVATE brisk::brisk brisk_options)
if(TARGET brisk_dist_mpi)
  add_dependencies(trainer_worker brisk_dist_mpi)
endif()
add_test(NAME accelerate.trainer.np1
  COMMAND ${BRISK_TEST_JOB} --timeout 100 --grep "PASS trainer rank 0 of 1"
    -- $<TARGET_FILE:trainer_worker> --out ${CMAKE_CURRENT_BINARY_DIR}/trainer_worker_out)
set_tests_properties(accelerate.trainer.np1 PROPERTIES LABELS "unit" TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
if(BRISK_HAVE_MPI)
  add_test(NAME accelerate.mp.trainer.np2
    COMMAND ${BRISK_TEST_JOB} --np 2 --timeout 120 --grep "PASS trainer rank 0 of 2"
      -- $<TARGET_FILE:trainer_worker> --out ${CMAKE_CURRENT_BINARY_DIR}/trainer_worker_out)
  set_tests_properties(accelerate.mp.trainer.np2 PROPERTIES LABELS "multiprocess" RESOURCE_LOCK cpu_cores
    TIMEOUT 200 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
endif()
