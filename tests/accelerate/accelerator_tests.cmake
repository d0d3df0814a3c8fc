# The Accelerator's multi-process tests (included from cli_tests.cmake): accelerator_worker runs
# one scenario per mpirun job through brisk_test_job (tests/tools/test_job.cpp); run_resume.sh compares a straight
# training run with one that is saved, stopped and resumed in a new process (and one killed while
# saving). They hold the cpu_cores lock (the two lanes: brisk_locked_tests_first in CMakeLists.txt) and use
# one OpenMP thread per process.
add_executable(accelerator_worker ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/accelerator_worker.cpp)
target_link_libraries(accelerator_worker PRIVATE brisk::brisk brisk_options)
if(TARGET brisk_dist_mpi)
  add_dependencies(accelerator_worker brisk_dist_mpi)
endif()

# The checkpoint fault tests (test_checkpoint_faults.cpp) run the worker as the process they kill.
if(TARGET test_accelerate)
  add_dependencies(test_accelerate accelerator_worker)
  target_compile_definitions(test_accelerate PRIVATE BRISK_ACCELERATOR_WORKER="$<TARGET_FILE:accelerator_worker>")
  # test_reshard.cpp runs `brisk estimate-memory`.
  add_dependencies(test_accelerate brisk_cli)
  target_compile_definitions(test_accelerate PRIVATE BRISK_CLI="$<TARGET_FILE:brisk_cli>")
endif()

set(_acc_run_mpi ${BRISK_TEST_JOB})
set(_acc_worker $<TARGET_FILE:accelerator_worker>)

# One process, no mpirun: the same scenarios in a world of one.
foreach(scenario sharding accumulate equivalence collectives)
  add_test(NAME accelerate.worker.${scenario}.np1
    COMMAND ${BRISK_TEST_JOB} --timeout 100 --grep "PASS ${scenario} rank 0 of 1" -- ${_acc_worker} ${scenario})
  set_tests_properties(accelerate.worker.${scenario}.np1 PROPERTIES LABELS "unit" TIMEOUT 120
    ENVIRONMENT "OMP_NUM_THREADS=1")
endforeach()
add_test(NAME accelerate.resume.np1
  COMMAND ${BRISK_TEST_JOB} --timeout 280 --grep "RESUME-OK"
    -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_resume.sh 1 ${_acc_worker} ${_acc_run_mpi}
    ${CMAKE_CURRENT_BINARY_DIR}/accelerate_resume_np1)
set_tests_properties(accelerate.resume.np1 PROPERTIES LABELS "unit" TIMEOUT 300
  ENVIRONMENT "OMP_NUM_THREADS=1")
# The same with the save inside a gradient accumulation window (micro-step 101 of 2-step windows).
add_test(NAME accelerate.resume.window.np1
  COMMAND ${BRISK_TEST_JOB} --timeout 280 --grep "RESUME-OK"
    -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_resume.sh 1 ${_acc_worker} ${_acc_run_mpi}
    ${CMAKE_CURRENT_BINARY_DIR}/accelerate_resume_window_np1 101)
set_tests_properties(accelerate.resume.window.np1 PROPERTIES LABELS "unit" TIMEOUT 300
  ENVIRONMENT "OMP_NUM_THREADS=1")

if(BRISK_HAVE_MPI)
  foreach(np 2 4)
    foreach(scenario sharding accumulate equivalence collectives)
      add_test(NAME accelerate.mp.${scenario}.np${np}
        COMMAND ${_acc_run_mpi} --np ${np} --timeout 120 --grep "PASS ${scenario} rank 0 of ${np}"
          -- ${_acc_worker} ${scenario})
      set_tests_properties(accelerate.mp.${scenario}.np${np} PROPERTIES LABELS "multiprocess"
        RESOURCE_LOCK cpu_cores TIMEOUT 200 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
    endforeach()
  endforeach()
  add_test(NAME accelerate.mp.resume.np2
    COMMAND ${BRISK_TEST_JOB} --timeout 570 --grep "RESUME-OK"
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_resume.sh 2 ${_acc_worker} ${_acc_run_mpi}
      ${CMAKE_CURRENT_BINARY_DIR}/accelerate_resume_np2)
  set_tests_properties(accelerate.mp.resume.np2 PROPERTIES LABELS "multiprocess" RESOURCE_LOCK cpu_cores
    TIMEOUT 600 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
  # Saved inside a gradient accumulation window: every rank's own unsynchronised gradients (and
  # the rest of its per-rank state) must come back on that rank.
  foreach(np 2 4)
    add_test(NAME accelerate.mp.resume.window.np${np}
      COMMAND ${BRISK_TEST_JOB} --timeout 570 --grep "RESUME-OK"
        -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_resume.sh ${np} ${_acc_worker} ${_acc_run_mpi}
        ${CMAKE_CURRENT_BINARY_DIR}/accelerate_resume_window_np${np} 101)
    set_tests_properties(accelerate.mp.resume.window.np${np} PROPERTIES LABELS "multiprocess"
      RESOURCE_LOCK cpu_cores TIMEOUT 600 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
  endforeach()
endif()

# Determinism: two seeded runs of 100 steps give bit-identical state (run_determinism.sh exits
# non-zero otherwise; judged by its exit status).
add_test(NAME accelerate.determinism.np1
  COMMAND ${BRISK_TEST_JOB} --timeout 280
    -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_determinism.sh 1 ${_acc_worker} ${_acc_run_mpi}
    ${CMAKE_CURRENT_BINARY_DIR}/accelerate_determinism_np1)
set_tests_properties(accelerate.determinism.np1 PROPERTIES LABELS "unit" TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
if(BRISK_HAVE_MPI)
  add_test(NAME accelerate.mp.determinism.np2
    COMMAND ${BRISK_TEST_JOB} --timeout 570
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_determinism.sh 2 ${_acc_worker} ${_acc_run_mpi}
      ${CMAKE_CURRENT_BINARY_DIR}/accelerate_determinism_np2)
  set_tests_properties(accelerate.mp.determinism.np2 PROPERTIES LABELS "multiprocess" RESOURCE_LOCK cpu_cores
    TIMEOUT 600 ENVIRONMENT "MPIEXEC=${BRISK_MPIEXEC}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/trainer_tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/zero_tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/gpt2_tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/fault_tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/restart_tests.cmake)
