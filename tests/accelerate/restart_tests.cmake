# `brisk launch --max-restarts` (label `faults`, with the fault matrix; docs/fault-tolerance.md).
# The launcher's side: a rank that fails on every attempt spends the budget, each restart saying
# which rank failed and how, and the launch exits with the last failure's status; a launcher that
# is itself interrupted does not restart. The program's side (run_restart.sh): a rank SIGKILLed at
# a chosen step on the first attempt (BRISK_FAULT_KILL_AT_STEP), the job restarted from the newest
# complete checkpoint, ends with the files of the run that never failed, SHA-256 for SHA-256.
add_executable(restart_worker ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/programs/restart_worker.cpp)
target_link_libraries(restart_worker PRIVATE brisk::brisk brisk_options)
if(TARGET brisk_dist_mpi)
  add_dependencies(restart_worker brisk_dist_mpi)
endif()

# brisk_restart_budget_case(NAME NP RESTARTS FAULT GREP [REJECT]): fault_worker fails the same way
# on every attempt.
function(brisk_restart_budget_case name np restarts fault grep)
  set(reject_args "")
  if(ARGC GREATER 5)
    set(reject_args --reject "${ARGV5}")
  endif()
  math(EXPR limit "(${restarts} + 1) * ${BRISK_FAULT_TIME_LIMIT}")
  math(EXPR last "${np} - 1")
  set(test accelerate.restart.${name}.np${np})
  add_test(NAME ${test}
    COMMAND ${BRISK_TEST_JOB} --expect fail --timeout ${limit} --grep "${grep}" ${reject_args}
      -- $<TARGET_FILE:brisk_cli> launch -n ${np} --max-restarts ${restarts} $<TARGET_FILE:fault_worker> ${fault}
      --path shm --rank ${last})
  set_tests_properties(${test} PROPERTIES LABELS "faults;multiprocess" RESOURCE_LOCK cpu_cores TIMEOUT 120
    ENVIRONMENT "OMP_NUM_THREADS=1;BRISK_TIMEOUT_SECONDS=3;BRISK_REDUCER_MODE=shm")
endfunction()

set(_attempt "brisk launch: attempt")
set(_t "failed after [0-9.]+ s")
# One process runs without mpirun: the program itself is the job's only rank.
brisk_restart_budget_case(sigkill_budget_spent 1 1 sigkill
  "${_attempt} 1 of 2 ${_t}: the program was killed by SIGKILL \\(signal 9\\) \\(status 137\\); starting the whole job again \\(BRISK_RESTART_COUNT=1\\).*${_attempt} 2 of 2 ${_t}: the program was killed by SIGKILL \\(signal 9\\); no restarts left \\(--max-restarts 1\\): exiting with status 137")
if(BRISK_HAVE_MPI)
  brisk_restart_budget_case(sigkill_budget_spent 2 2 sigkill
    "${_attempt} 1 of 3 ${_t}: rank 1 was killed by SIGKILL \\(signal 9\\).*BRISK_RESTART_COUNT=1.*${_attempt} 2 of 3 ${_t}: rank 1 was killed by SIGKILL.*BRISK_RESTART_COUNT=2.*${_attempt} 3 of 3 ${_t}: rank 1 was killed by SIGKILL \\(signal 9\\); no restarts left \\(--max-restarts 2\\): exiting with status")
  brisk_restart_budget_case(exit1_budget_spent 2 1 exit1
    "${_attempt} 1 of 2 ${_t}: rank 1 exited with status 1 \\(status 1\\); starting the whole job again.*${_attempt} 2 of 2 ${_t}: rank 1 exited with status 1; no restarts left")
  brisk_restart_budget_case(exception_budget_spent 4 1 exception
    "${_attempt} 1 of 2 ${_t}: rank 3 was killed by SIGABRT \\(signal 6\\).*${_attempt} 2 of 2 ${_t}: rank 3 was killed by SIGABRT")
  # The launcher itself told to stop (a user's Ctrl-C, the batch system's SIGTERM): no restart.
  brisk_restart_budget_case(launcher_sigterm_no_restart 2 3 launcher_sigterm
    "brisk launch: received SIGTERM from process [0-9]+.*stopped by SIGTERM" "attempt [0-9]+ of")
endif()

# brisk_restart_exact_case(NAME NP PATH KILL LAUNCH_FLAGS WORKER_FLAGS...): restart_worker; PATH shm
# or overlap (the MPI path) chooses BRISK_REDUCER_MODE; KILL is STEP:RANK.
function(brisk_restart_exact_case name np path kill launch_flags)
  set(worker_flags ${ARGN})
  set(test accelerate.restart.exact.${name}.np${np})
  add_test(NAME ${test}
    COMMAND ${BRISK_TEST_JOB} --timeout 170 --grep "RESTART-OK"
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_restart.sh ${BRISK_TEST_JOB} $<TARGET_FILE:brisk_cli>
      ${CMAKE_CURRENT_BINARY_DIR}/${test} ${np} ${kill} "${launch_flags}" --out $<TARGET_FILE:restart_worker>
      ${worker_flags})
  set_tests_properties(${test} PROPERTIES LABELS "faults;multiprocess" RESOURCE_LOCK cpu_cores TIMEOUT 200
    ENVIRONMENT "OMP_NUM_THREADS=1;BRISK_REDUCER_MODE=${path}")
endfunction()

# A representative matrix rather than the full product (processes x paths x stages x precisions x
# accumulation x epoch shapes), each case a few seconds: every value of every axis appears, and
# every stage and precision on more than one process. "cut": epochs of 5 steps out of 24/12/6
# batches (4 on four processes); "whole": whole epochs. Checkpoints every 4 steps; the kill at
# step 7 falls after the first, the one at step 3 before any (the restart starts from scratch).
set(_cut --epochs 3 --steps-per-epoch 5 --save-every 4)
set(_whole --epochs 2 --save-every 4)
brisk_restart_exact_case(fp32_whole 1 shm 7:0 "" ${_whole})
brisk_restart_exact_case(bf16_accum2_cut 1 shm 7:0 "--mixed_precision bf16 --gradient_accumulation_steps 2" ${_cut})
brisk_restart_exact_case(before_first_checkpoint 1 shm 3:0 "" ${_cut})
if(BRISK_HAVE_MPI)
  brisk_restart_exact_case(shm_fp32_whole 2 shm 7:1 "" ${_whole})
  brisk_restart_exact_case(mpi_accum2_cut 2 overlap 7:1 "--gradient_accumulation_steps 2" ${_cut})
  brisk_restart_exact_case(zero1_bf16_whole 2 shm 7:1 "--sharding zero1 --mixed_precision bf16" ${_whole})
  brisk_restart_exact_case(zero2_accum2_cut 2 shm 7:0 "--sharding zero2 --gradient_accumulation_steps 2" ${_cut})
  brisk_restart_exact_case(zero3_cut 2 overlap 7:1 "--sharding zero3" ${_cut})
  brisk_restart_exact_case(shm_accum2_cut 4 shm 5:2 "--gradient_accumulation_steps 2"
    --epochs 3 --steps-per-epoch 4 --save-every 2)
  brisk_restart_exact_case(zero3_bf16_whole 4 shm 5:3 "--sharding zero3 --mixed_precision bf16"
    --epochs 2 --save-every 2)
  brisk_restart_exact_case(mpi_bf16_cut 4 overlap 5:1 "--mixed_precision bf16"
    --epochs 3 --steps-per-epoch 4 --save-every 2)
  # Checkpoints after each epoch only, the epoch's steps counted from 0 (as fashion_mnist): the
  # save after a cut epoch must send the resumed run to the next epoch.
  brisk_restart_exact_case(epoch_saves_cut 2 shm 12:1 "--gradient_accumulation_steps 2"
    --epochs 4 --steps-per-epoch 5 --save-every 0)
  brisk_restart_exact_case(epoch_saves_cut 4 overlap 10:0 "--sharding zero2"
    --epochs 4 --steps-per-epoch 3 --save-every 0)
endif()

# Saves written in the background (async_save through BRISK_ASYNC_SAVE=1): the kill may fall while
# the newest save is still being written, and the restarted job resumes from the newest complete
# one (or from scratch); the end is the same bits either way. Every rank writes in the background;
# the main process completes the checkpoint once every rank's files are there.
function(brisk_restart_async_case name np path kill launch_flags)
  brisk_restart_exact_case(async_${name} ${np} ${path} ${kill} "${launch_flags}" ${ARGN})
  set_property(TEST accelerate.restart.exact.async_${name}.np${np} APPEND PROPERTY ENVIRONMENT "BRISK_ASYNC_SAVE=1")
endfunction()
brisk_restart_async_case(fp32_whole 1 shm 7:0 "" ${_whole})
brisk_restart_async_case(accum2_cut 1 shm 6:0 "--gradient_accumulation_steps 2" --epochs 3 --steps-per-epoch 5
  --save-every 2)
if(BRISK_HAVE_MPI)
  brisk_restart_async_case(zero3_cut 2 overlap 7:1 "--sharding zero3" ${_cut})
  brisk_restart_async_case(zero2_main_killed 2 shm 6:0 "--sharding zero2" --epochs 3 --steps-per-epoch 5 --save-every 2)
  brisk_restart_async_case(shm_accum2_cut 4 shm 5:2 "--gradient_accumulation_steps 2"
    --epochs 3 --steps-per-epoch 4 --save-every 2)
endif()

# BRISK_TRACE keeps a trace per attempt (the first written before the injected kill), and
# docs/restart_trace_svg.py draws them.
add_test(NAME accelerate.restart.trace_per_attempt
  COMMAND ${BRISK_TEST_JOB} --timeout 100 --grep "TRACE-OK"
    -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_restart_trace.sh $<TARGET_FILE:brisk_cli>
    ${CMAKE_CURRENT_BINARY_DIR}/accelerate.restart.trace_per_attempt ${PROJECT_SOURCE_DIR}
    $<TARGET_FILE:restart_worker> --epochs 2 --save-every 4)
set_tests_properties(accelerate.restart.trace_per_attempt PROPERTIES LABELS "faults" RESOURCE_LOCK cpu_cores
  TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

# The examples and the Trainer continue after a restart with no flag (one process each; killed
# after their second checkpoint).
if(BRISK_BUILD_EXAMPLES)
  function(brisk_restart_example_case name kill out_flag)
    set(test accelerate.restart.example.${name})
    add_test(NAME ${test}
      COMMAND ${BRISK_TEST_JOB} --timeout 280 --grep "RESTART-OK"
        -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_restart.sh ${BRISK_TEST_JOB} $<TARGET_FILE:brisk_cli>
        ${CMAKE_CURRENT_BINARY_DIR}/${test} 1 ${kill} "" ${out_flag} ${ARGN})
    set_tests_properties(${test} PROPERTIES LABELS "faults;example" RESOURCE_LOCK cpu_cores TIMEOUT 300
      ENVIRONMENT "OMP_NUM_THREADS=1")
  endfunction()
  brisk_restart_example_case(fashion_mnist 50:0 --out $<TARGET_FILE:fashion_mnist> --epochs 3 --steps-per-epoch 20
    --threads 1 --workers 0)
  brisk_restart_example_case(fashion_mnist_trainer 25:0 --output_dir $<TARGET_FILE:fashion_mnist_trainer>
    --max_steps 30 --save_strategy steps --save_steps 10 --eval_strategy no --disable_tqdm)
  brisk_restart_example_case(gpt2 15:0 --output_dir $<TARGET_FILE:gpt2> --preset tiny --max_steps 20
    --warmup_steps 5 --learning_rate 3e-3 --log_every 5 --eval_every 10 --eval_steps 2 --threads 1 --batch_size 4)
  # --checkpoint-every: checkpoints in the middle of an epoch (fashion_mnist) and between two logs
  # (gpt2), written in the background (the examples' default); killed a few steps after one.
  brisk_restart_example_case(fashion_mnist_checkpoint_every 31:0 --out $<TARGET_FILE:fashion_mnist> --epochs 2
    --steps-per-epoch 20 --checkpoint-every 7 --threads 1 --workers 0)
  brisk_restart_example_case(gpt2_checkpoint_every 14:0 --output_dir $<TARGET_FILE:gpt2> --preset tiny --max_steps 20
    --warmup_steps 5 --learning_rate 3e-3 --log_every 5 --eval_every 10 --checkpoint-every 3 --eval_steps 2
    --threads 1 --batch_size 4)
endif()

# Preemption (docs/fault-tolerance.md, "Preemption"; run_preempt.sh): SIGTERM or SIGUSR1 makes every
# rank finish its optimizer step, save and exit 75, and the launch (given --max-restarts 2) exits 75
# without restarting; the same command started again continues from the PREEMPTED marker's
# checkpoint and ends with the files of the run that was never preempted. SPEC is
# BRISK_FAULT_SIGNAL_AT_STEP's STEP:RANK:SIGNAL:TARGET (TARGET self: only that rank gets the signal,
# yet every rank stops after the same step; launcher: the batch system's way).
function(brisk_preempt_case name np path spec launch_flags)
  set(test accelerate.preempt.${name}.np${np})
  add_test(NAME ${test}
    COMMAND ${BRISK_TEST_JOB} --timeout 170 --grep "PREEMPT-OK"
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/accelerate/run_preempt.sh ${BRISK_TEST_JOB} $<TARGET_FILE:brisk_cli>
      ${CMAKE_CURRENT_BINARY_DIR}/${test} ${np} ${spec} "${launch_flags}" ${ARGN})
  set_tests_properties(${test} PROPERTIES LABELS "faults;multiprocess" RESOURCE_LOCK cpu_cores TIMEOUT 200
    ENVIRONMENT "OMP_NUM_THREADS=1;BRISK_REDUCER_MODE=${path}")
endfunction()

set(_worker --out $<TARGET_FILE:restart_worker>)
brisk_preempt_case(usr1_self 1 shm 6:0:USR1:self "" ${_worker} ${_cut})
brisk_preempt_case(term_launcher_bf16_accum2 1 shm 7:0:TERM:launcher
  "--mixed_precision bf16 --gradient_accumulation_steps 2" ${_worker} ${_cut})
if(BRISK_HAVE_MPI)
  brisk_preempt_case(usr1_launcher 2 shm 6:1:USR1:launcher "" ${_worker} ${_whole})
  # With saves in the background: the preemption's save is complete before the job exits.
  brisk_preempt_case(async_usr1_launcher 2 shm 6:1:USR1:launcher "" ${_worker} ${_whole})
  set_property(TEST accelerate.preempt.async_usr1_launcher.np2 APPEND PROPERTY ENVIRONMENT "BRISK_ASYNC_SAVE=1")
  # mpirun would kill its ranks a second after a SIGTERM: the launcher passes it on as SIGUSR1.
  brisk_preempt_case(term_launcher_mpi 2 overlap 6:0:TERM:launcher "" ${_worker} ${_cut})
  # Only rank 1 gets the signal (srun's way is every task; a stray kill is one).
  brisk_preempt_case(term_one_rank 2 shm 6:1:TERM:self "" ${_worker} ${_cut})
  # Signalled in the middle of an accumulation window (micro-step 7 of windows of 2): the window's
  # optimizer step finishes first.
  brisk_preempt_case(zero2_accum2_one_rank 2 overlap 7:0:USR1:self "--sharding zero2 --gradient_accumulation_steps 2"
    ${_worker} ${_cut})
endif()
if(BRISK_BUILD_EXAMPLES)
  # The examples and the Trainer, preempted in the middle of an epoch (one process each).
  brisk_preempt_case(example.fashion_mnist 1 shm 30:0:USR1:launcher "" --out $<TARGET_FILE:fashion_mnist> --epochs 3
    --steps-per-epoch 20 --threads 1 --workers 0)
  brisk_preempt_case(example.fashion_mnist_trainer 1 shm 14:0:TERM:launcher "" --output_dir
    $<TARGET_FILE:fashion_mnist_trainer> --max_steps 30 --save_strategy steps --save_steps 10 --eval_strategy no
    --disable_tqdm)
  brisk_preempt_case(example.gpt2 1 shm 12:0:USR1:self "" --output_dir $<TARGET_FILE:gpt2> --preset tiny --max_steps 20
    --warmup_steps 5 --learning_rate 3e-3 --log_every 5 --eval_every 10 --eval_steps 2 --threads 1 --batch_size 4)
endif()

# A restart with a hostfile: two "hosts" (network namespaces, tests/dist/mp/run_two_hosts.sh), rank
# 1 on the second one killed at its step 7; skipped where namespaces cannot be made.
if(BRISK_HAVE_MPI)
  add_test(NAME accelerate.restart.exact.two_hosts.np2
    COMMAND ${BRISK_TEST_JOB} --skip-code 77 --timeout 250 --grep "TWO-HOSTS-RESTART-OK"
      -- bash ${CMAKE_CURRENT_SOURCE_DIR}/dist/mp/run_two_hosts.sh --restart $<TARGET_FILE:brisk_cli>
      ${CMAKE_CURRENT_BINARY_DIR}/accelerate.restart.exact.two_hosts.np2 $<TARGET_FILE:restart_worker> ${_cut})
  set_tests_properties(accelerate.restart.exact.two_hosts.np2 PROPERTIES LABELS "faults;multiprocess"
    RESOURCE_LOCK cpu_cores TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "OMP_NUM_THREADS=1;BRISK_REDUCER_MODE=overlap")
endif()

# Under Slurm (opt-in like dist.slurm.two_tasks: -DBRISK_SLURM_TESTS=ON, `ctest -L slurm`; root; it
# installs slurm-wlm and munge when missing and starts its own daemons; docs/slurm.md):
# examples/slurm/brisk-requeue.sbatch warned by SIGUSR1 saves, requeues itself and continues, and
# `brisk launch --max-restarts` inside an sbatch job restarts a killed rank; both to the bits of the
# job left alone.
if(BRISK_SLURM_TESTS)
  add_test(NAME accelerate.slurm.requeue_after_preemption
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/slurm-test.sh --requeue $<TARGET_FILE:restart_worker> ${_cut}
      --sleep-ms 300)
  add_test(NAME accelerate.slurm.restart_in_allocation
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/slurm-test.sh --restart $<TARGET_FILE:brisk_cli>
      $<TARGET_FILE:restart_worker> ${_cut})
  set_tests_properties(accelerate.slurm.requeue_after_preemption accelerate.slurm.restart_in_allocation PROPERTIES
    LABELS "slurm" TIMEOUT 400 SKIP_RETURN_CODE 77 RESOURCE_LOCK cpu_cores)
endif()
