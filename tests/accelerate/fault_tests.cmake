# The fault matrix (label `faults`; docs/data-parallel.md, "When a rank fails"): every way a rank
# can fail, on every gradient path, started as users start jobs (`brisk launch -n 2`). Each case
# is judged by brisk_test_job: the job must fail (non-zero status), end within its time limit, leave
# no process behind, and say which rank failed and what it was doing (--grep).
add_executable(fault_worker ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/fault_worker.cpp)
target_link_libraries(fault_worker PRIVATE brisk::brisk brisk_options)
if(TARGET brisk_dist_mpi)
  add_dependencies(fault_worker brisk_dist_mpi)
endif()

# What the job must say, per fault ('.' matches newlines). Rank 1 fails at step 5 of 30 (rank 2 of
# 4 in the np4 cases); a fault that leaves the others waiting (skip, hang, wrong_collective without
# debug mode) runs with a 3 s collective timeout, so every case must end within 10 s of the fault
# (a hang: the timeout + 5 s): the limit below adds the job's start-up to that.
set(_fault_grep_abort "fault: abort at step.*process rank @R@ .*exited on signal 6")
set(_fault_grep_sigkill "fault: sigkill at step.*process rank @R@ .*exited on signal 9")
set(_fault_grep_exception "terminate called after throwing.*process rank @R@ .*exited on signal 6")
set(_fault_grep_exit1 "\\[brisk rank @R@\\] exiting with status 1: stopping the other")
set(_fault_grep_exit0 "rank @R@ left the job \\(its program exited after issuing [0-9]+ collectives\\) while this rank waits in")
set(_fault_grep_skip "what each rank is doing now:.*rank @R@ (\\(this rank\\) )?waits in [^\n]* #[0-9]+ \\(f32, \\[[0-9]+\\]")
set(_fault_grep_skip_debug "collective mismatch \\(BRISK_DEBUG\\): rank 0 called all_reduce #[0-9]+ \\(f32, \\[1\\], avg\\) but rank @R@ called")
set(_fault_grep_hang "rank @R@ is in no collective: it finished")
set(_fault_grep_wrong_collective "rank @R@ (\\(this rank\\) )?waits in broadcast #[0-9]+")
set(_fault_grep_wrong_debug "collective mismatch \\(BRISK_DEBUG\\): rank 0 called all_reduce #[0-9]+ [^\n]* but rank @R@ called broadcast #")
set(_fault_grep_kill_in_shm "rank @R@ \\(process [0-9]+\\) exited while rank 0 waited for it in a shared-memory all-reduce")
set(_fault_grep_launcher_sigint "brisk launch: received SIGINT from process [0-9]+.*stopped by SIGINT")
set(_fault_grep_launcher_sigterm "brisk launch: received SIGTERM from process [0-9]+.*stopped by SIGTERM")
set(_faults abort sigkill exception exit1 exit0 skip skip_debug hang wrong_collective wrong_debug launcher_sigint
  launcher_sigterm)
set(BRISK_FAULT_TIME_LIMIT 15 CACHE STRING "Seconds a fault-matrix job may take, start-up included")

# brisk_fault_case(PATH FAULT NP RANK): one job, `brisk launch -n NP fault_worker ...`.
function(brisk_fault_case path fault np rank)
  set(env "OMP_NUM_THREADS=1;BRISK_TIMEOUT_SECONDS=3")
  if(path STREQUAL "overlap" OR path STREQUAL "shm")
    list(APPEND env "BRISK_REDUCER_MODE=${path}")
  elseif(path MATCHES "^zero")
    list(APPEND env "BRISK_SHARDING=${path}")
  endif()
  set(worker_fault ${fault})
  if(fault MATCHES "_debug$")
    list(APPEND env "BRISK_DEBUG=1")
    string(REGEX REPLACE "_debug$" "" worker_fault ${fault})
    if(worker_fault STREQUAL "wrong")
      set(worker_fault wrong_collective)
    endif()
  endif()
  string(REPLACE "@R@" "${rank}" grep "${_fault_grep_${fault}}")
  set(name accelerate.faults.${path}.${fault}.np${np})
  add_test(NAME ${name}
    COMMAND ${BRISK_TEST_JOB} --expect fail --skip-code 77 --timeout ${BRISK_FAULT_TIME_LIMIT} --grep "${grep}"
      -- $<TARGET_FILE:brisk_cli> launch -n ${np} $<TARGET_FILE:fault_worker> ${worker_fault} --path ${path}
      --rank ${rank})
  set(labels "faults;multiprocess")
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" RESOURCE_LOCK cpu_cores SKIP_RETURN_CODE 77
    TIMEOUT 60 ENVIRONMENT "${env}")
endfunction()

if(BRISK_HAVE_MPI)
  foreach(path overlap shm zero1 zero2 zero3 nccl)
    foreach(fault ${_faults})
      brisk_fault_case(${path} ${fault} 2 1)
    endforeach()
  endforeach()
  # Killed while the others are inside the shared-memory all-reduce (elsewhere that is `sigkill`).
  brisk_fault_case(shm kill_in_shm 2 1)
  # The report's case: four processes on the default path of a machine they fill.
  foreach(fault exit0 skip skip_debug hang)
    brisk_fault_case(shm ${fault} 4 2)
  endforeach()
endif()

# A job that does not stop when the launcher passes a signal on (here a program that ignores it;
# mpirun under heavy load was seen to take a minute) is killed, with everything it started, 5 s
# after a signal that stops it (SIGHUP here, as SIGINT and SIGQUIT), --preempt_grace seconds after
# one that preempts it (SIGTERM, SIGUSR1): the launcher still ends in time and says so.
add_test(NAME accelerate.faults.launcher_kills_a_job_that_ignores_sigterm
  COMMAND ${BRISK_TEST_JOB} --expect fail --exit-code 143 --timeout 12
    --grep "preempting the program.*killed if still running in 3 s.*did not stop within 3 s of SIGTERM: killing it and its 1 process.*stopped by SIGTERM"
    -- $<TARGET_FILE:brisk_cli> launch -n 1 --preempt_grace 3 bash -c "trap '' TERM; kill -TERM $PPID; sleep 60 & wait")
add_test(NAME accelerate.faults.launcher_kills_a_job_that_ignores_sighup
  COMMAND ${BRISK_TEST_JOB} --expect fail --exit-code 129 --timeout 14
    --grep "did not stop within 5 s of SIGHUP: killing it and its 1 process.*stopped by SIGHUP"
    -- $<TARGET_FILE:brisk_cli> launch -n 1 bash -c "trap '' HUP; kill -HUP $PPID; sleep 60 & wait")
set_tests_properties(accelerate.faults.launcher_kills_a_job_that_ignores_sigterm
  accelerate.faults.launcher_kills_a_job_that_ignores_sighup PROPERTIES LABELS "faults;multiprocess" TIMEOUT 40)
