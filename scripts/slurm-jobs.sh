# The training-job checks of scripts/slurm-test.sh (--requeue, --restart; docs/slurm.md), sourced
# once its cluster is up: they use its tmp, ntasks, program, brisk, job_timeout, overcommit and say.
# shellcheck shell=bash disable=SC2154  # tmp, ntasks, program, brisk, ... come from slurm-test.sh
# shellcheck source=tests/accelerate/same_bits.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/accelerate/same_bits.sh"
repo=$(realpath "$(dirname "${BASH_SOURCE[0]}")/..")

# job_field ID FIELD: one field of `scontrol show job`.
job_field() { scontrol -o show job "$1" 2> /dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# wait_job ID: waits (at most job_timeout s) until the job ended for good, a requeue not counting,
# and prints its final state.
wait_job() {
  local state=""
  for _ in $(seq $((job_timeout * 4))); do
    state=$(job_field "$1" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
        echo "$state"
        return 0
        ;;
    esac
    sleep 0.25
  done
  echo "${state:-unknown} after ${job_timeout}s"
  return 1
}

sbatch_opts=(--parsable --nodes=1 --ntasks="$ntasks" --ntasks-per-node="$ntasks" --cpus-per-task=1 --time=5)

# --requeue: examples/slurm/brisk-requeue.sbatch as it is, straight and sent SIGUSR1 once its first
# checkpoint is there (what --signal=B:USR1@90 does before the time limit): it must save, requeue
# itself, run again from the checkpoint and end with the straight job's files.
slurm_requeue() {
  local script="$repo/examples/slurm/brisk-requeue.sbatch" id state restarts
  say "sbatch ${script#"$repo/"} $program --out straight $*"
  id=$(sbatch "${sbatch_opts[@]}" "${overcommit[@]}" --output="$tmp/straight.out" "$script" "$program" \
    --out "$tmp/straight" "$@") || { say "FAILED: sbatch"; return 1; }
  state=$(wait_job "$id")
  cat "$tmp/straight.out"
  [[ $state == COMPLETED ]] || { say "FAILED: the straight job ended $state"; return 1; }
  say "sbatch ${script#"$repo/"} $program --out preempted $*, then scancel --batch --signal=USR1"
  id=$(sbatch "${sbatch_opts[@]}" "${overcommit[@]}" --output="$tmp/preempted.out" "$script" "$program" \
    --out "$tmp/preempted" "$@") || { say "FAILED: sbatch"; return 1; }
  for _ in $(seq $((job_timeout * 10))); do
    [[ -d $tmp/preempted/checkpoints/checkpoint_0 ]] && break
    sleep 0.1
  done
  [[ -d $tmp/preempted/checkpoints/checkpoint_0 ]] || { cat "$tmp/preempted.out"; say "FAILED: no first checkpoint"; return 1; }
  scancel --batch --signal=USR1 "$id" || { say "FAILED: scancel"; return 1; }
  # slurmctld holds a requeued job about two and a half minutes before it may start again (seen
  # with 22.05): the test does not wait for that, only until the first run's step has cleaned up
  # (its PMIx socket gone: the next run's step of the same number binds it again).
  for _ in $(seq $((job_timeout * 4))); do
    state=$(job_field "$id" JobState)
    if [[ $state == PENDING && $(job_field "$id" Restarts) -ge 1 ]]; then
      for _ in $(seq 120); do
        [[ -e $tmp/spool/stepd.slurm.pmix.$id.0 ]] || break
        sleep 0.5
      done
      sleep 1
      scontrol update JobId="$id" StartTime=now
      break
    fi
    [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED ]] && break
    sleep 0.25
  done
  state=$(wait_job "$id")
  restarts=$(job_field "$id" Restarts)
  cat "$tmp/preempted.out"
  [[ $state == COMPLETED ]] || { say "FAILED: the signalled job ended $state"; return 1; }
  ((restarts >= 1)) || { say "FAILED: the signalled job was not requeued (Restarts=$restarts)"; return 1; }
  if ! grep -q "brisk-requeue: preempted: requeueing job $id" "$tmp/preempted.out" ||
    ! grep -q "Accelerator: the last run was preempted" "$tmp/preempted.out"; then
    say "FAILED: the job's lines do not show a requeue and a run that continued"
    return 1
  fi
  same_bits "$tmp/straight" "$tmp/preempted" || return 1
  say "passed: preempted by SIGUSR1, requeued (Restarts=$restarts), continued to the straight job's bits"
}

# --restart: `brisk launch -n NTASKS --max-restarts 2` inside an sbatch job (mpirun takes the
# allocation's slots), straight and with rank 1 SIGKILLed at its step 7 on the first attempt.
slurm_restart() {
  local id state
  printf '#!/bin/bash\nexec %q launch -n %d --max-restarts 2 %q --out "$@"\n' "$brisk" "$ntasks" "$program" \
    > "$tmp/launch.sbatch"
  say "sbatch: brisk launch -n $ntasks --max-restarts 2 $program --out straight $*"
  id=$(sbatch "${sbatch_opts[@]}" "${overcommit[@]}" --output="$tmp/straight.out" "$tmp/launch.sbatch" \
    "$tmp/straight" "$@") || { say "FAILED: sbatch"; return 1; }
  state=$(wait_job "$id")
  cat "$tmp/straight.out"
  [[ $state == COMPLETED ]] || { say "FAILED: the straight job ended $state"; return 1; }
  say "sbatch: the same with BRISK_FAULT_KILL_AT_STEP=7:1"
  id=$(BRISK_FAULT_KILL_AT_STEP=7:1 sbatch "${sbatch_opts[@]}" "${overcommit[@]}" --output="$tmp/restarted.out" \
    "$tmp/launch.sbatch" "$tmp/restarted" "$@") || { say "FAILED: sbatch"; return 1; }
  state=$(wait_job "$id")
  grep -E "BRISK_FAULT|brisk launch: attempt|continues from" "$tmp/restarted.out"
  [[ $state == COMPLETED ]] || { cat "$tmp/restarted.out"; say "FAILED: the job ended $state"; return 1; }
  if ! grep -qE "brisk launch: attempt 1 of 3 failed after [0-9.]+ s: rank 1 was killed by SIGKILL" "$tmp/restarted.out" ||
    ! grep -q "restart 1 (BRISK_RESTART_COUNT) continues from" "$tmp/restarted.out"; then
    cat "$tmp/restarted.out"
    say "FAILED: no restart of rank 1's failure from a checkpoint"
    return 1
  fi
  same_bits "$tmp/straight" "$tmp/restarted" || return 1
  say "passed: rank 1 killed, the job restarted inside its allocation, the straight job's bits"
}
