# Sharded data parallelism, ZeRO stages 1 and 2 (included from accelerator_tests.cmake; docs/sharding.md):
# zero_worker trains against plain data parallelism and measures optimizer-state memory, in a world of
# one and under mpirun with 2 and 4 processes (label `sharding`; the multi-process runs hold the
# cpu_cores lock). brisk_test_job fails a run when any rank fails or it outlives --timeout.
add_executable(zero_worker ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/zero_worker.cpp)
target_link_libraries(zero_worker PRIVATE brisk::brisk brisk_options)
if(TARGET brisk_dist_mpi)
  add_dependencies(zero_worker brisk_dist_mpi)
endif()
set(_zero_worker $<TARGET_FILE:zero_worker>)
foreach(stage zero1 zero2)
  foreach(scenario equivalence gpt2 memory resume)
    add_test(NAME accelerate.zero.${scenario}.${stage}.np1
      COMMAND ${BRISK_TEST_JOB} --timeout 100 --grep "PASS ${scenario} ${stage} rank 0 of 1"
        -- ${_zero_worker} ${scenario} ${stage})
    set_tests_properties(accelerate.zero.${scenario}.${stage}.np1 PROPERTIES LABELS "unit;sharding" TIMEOUT 120
      ENVIRONMENT "OMP_NUM_THREADS=1")
    if(BRISK_HAVE_MPI)
      foreach(np 2 4)
        add_test(NAME accelerate.mp.zero.${scenario}.${stage}.np${np}
          COMMAND ${BRISK_TEST_JOB} --np ${np} --timeout 120 --grep "PASS ${scenario} ${stage} rank 0 of ${np}"
            -- ${_zero_worker} ${scenario} ${stage})
        set_tests_properties(accelerate.mp.zero.${scenario}.${stage}.np${np} PROPERTIES
          LABELS "multiprocess;sharding" RESOURCE_LOCK cpu_cores TIMEOUT 200 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
      endforeach()
    endif()
  endforeach()
endforeach()
