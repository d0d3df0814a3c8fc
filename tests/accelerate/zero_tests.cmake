# Sharded data parallelism, ZeRO stages 1, 2 and 3 (included from accelerator_tests.cmake; docs/sharding.md):
# zero_worker trains against plain data parallelism and measures optimizer-state memory, in a world of
# one and under mpirun with 2 and 4 processes (label `sharding`; the multi-process runs hold the
# cpu_cores lock). brisk_test_job fails a run when any rank fails or it outlives --timeout.
add_executable(zero_worker ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/zero_worker.cpp)
target_link_libraries(zero_worker PRIVATE brisk::brisk brisk_options)
if(TARGET brisk_dist_mpi)
  add_dependencies(zero_worker brisk_dist_mpi)
endif()
set(_zero_worker $<TARGET_FILE:zero_worker>)
foreach(stage zero1 zero2 zero3)
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
# zero3: a missing parameter shard file is an error naming it on every rank (none left waiting).
add_test(NAME accelerate.zero.shard_missing.zero3.np1
  COMMAND ${BRISK_TEST_JOB} --timeout 100 --grep "PASS shard-missing zero3 rank 0 of 1" -- ${_zero_worker} shard-missing zero3)
set_tests_properties(accelerate.zero.shard_missing.zero3.np1 PROPERTIES LABELS "unit;sharding" TIMEOUT 120
  ENVIRONMENT "OMP_NUM_THREADS=1")
if(BRISK_HAVE_MPI)
  add_test(NAME accelerate.mp.zero.shard_missing.zero3.np2
    COMMAND ${BRISK_TEST_JOB} --np 2 --timeout 120 --grep "PASS shard-missing zero3 rank 0 of 2"
      -- ${_zero_worker} shard-missing zero3)
  set_tests_properties(accelerate.mp.zero.shard_missing.zero3.np2 PROPERTIES LABELS "multiprocess;sharding"
    RESOURCE_LOCK cpu_cores TIMEOUT 200 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
endif()
# Resuming on another number of processes and/or sharding stage (run_reshard.sh; docs/checkpoints.md):
# SAVE_NP:SAVE_STAGE:LOAD_NP:LOAD_STAGE:MODE. Those with more than one process need MPI.
set(_reshard_cases
  1:zero2:1:none:resume 1:none:1:zero1:resume
  4:zero2:2:zero2:resume 2:zero2:1:none:resume 2:none:4:zero1:resume 4:zero1:2:none:resume 1:none:2:zero2:resume
  2:zero2:1:zero2:refuse 4:none:2:zero1:refuse 2:none:1:none:warn 2:zero1:4:zero2:warn
  1:none:1:none:merge 2:zero2:2:zero2:merge 4:zero1:4:zero1:merge
  2:zero3:1:none:resume 1:none:2:zero3:resume 4:zero3:2:zero3:resume 2:zero3:4:zero3:resume 2:zero3:4:zero2:resume
  1:zero3:1:zero1:resume 2:zero3:1:zero3:refuse
  2:zero3:2:zero3:merge 4:zero3:4:zero3:merge)
foreach(case ${_reshard_cases})
  string(REPLACE ":" ";" parts ${case})
  list(GET parts 0 snp)
  list(GET parts 1 sstage)
  list(GET parts 2 lnp)
  list(GET parts 3 lstage)
  list(GET parts 4 mode)
  set(name accelerate.reshard.${mode}.np${snp}_${sstage}.to.np${lnp}_${lstage})
  if(snp EQUAL 1 AND lnp EQUAL 1)
    add_test(NAME ${name}
      COMMAND ${BRISK_TEST_JOB} --timeout 200 --grep "RESHARD-OK"
        -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_reshard.sh ${_zero_worker} ${BRISK_TEST_JOB}
        ${CMAKE_CURRENT_BINARY_DIR}/${name} ${snp} ${sstage} ${lnp} ${lstage} ${mode} $<TARGET_FILE:brisk_cli>)
    set_tests_properties(${name} PROPERTIES LABELS "unit;sharding" TIMEOUT 240 ENVIRONMENT "OMP_NUM_THREADS=1")
  elseif(BRISK_HAVE_MPI)
    add_test(NAME ${name}
      COMMAND ${BRISK_TEST_JOB} --timeout 400 --grep "RESHARD-OK"
        -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_reshard.sh ${_zero_worker} ${BRISK_TEST_JOB}
        ${CMAKE_CURRENT_BINARY_DIR}/${name} ${snp} ${sstage} ${lnp} ${lstage} ${mode} $<TARGET_FILE:brisk_cli>)
    set_tests_properties(${name} PROPERTIES LABELS "multiprocess;sharding" RESOURCE_LOCK cpu_cores TIMEOUT 440
      ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
  endif()
endforeach()
# merge-weights on the checkpoint of `brisk launch -n 2 fashion_mnist --sharding zero3` equals the
# run's save_model file byte for byte (run_reshard.sh's fashion mode).
if(BRISK_HAVE_MPI AND BRISK_BUILD_EXAMPLES)
  set(name accelerate.reshard.merge.fashion_mnist_np2_zero3)
  add_test(NAME ${name}
    COMMAND ${BRISK_TEST_JOB} --timeout 250 --grep "RESHARD-OK"
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_reshard.sh ${_zero_worker} ${BRISK_TEST_JOB}
      ${CMAKE_CURRENT_BINARY_DIR}/${name} 2 zero3 2 zero3 fashion $<TARGET_FILE:brisk_cli>
      $<TARGET_FILE:fashion_mnist>)
  set_tests_properties(${name} PROPERTIES LABELS "multiprocess;sharding" RESOURCE_LOCK cpu_cores TIMEOUT 300
    ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC};OMP_NUM_THREADS=1;XDG_CONFIG_HOME=${CMAKE_CURRENT_BINARY_DIR}/${name}_xdg")
endif()
