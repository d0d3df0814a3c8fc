#!/usr/bin/env bash
# Determinism: after set_seed (the worker's Accelerator seed), two runs of 100 training steps
# (a small model with dropout, a shuffling DataLoader, Adam, a schedule) on the same number of
# processes give bit-identical losses, parameters, optimizer state and RNG state on every rank.
# A third run that differs (no gradient accumulation instead of 2 micro-steps) must give other results, which shows that
# the comparison can fail.
#
#   run_determinism.sh NP WORKER TEST_JOB WORK_DIR   (TEST_JOB: brisk_test_job, which runs the mpirun jobs)
set -u
np=$1; worker=$2; run_mpi=$3; work=$4
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() {
  if [[ $np == 1 ]]; then OMP_NUM_THREADS=1 "$worker" train "$@"
  else "$run_mpi" --np "$np" --expect pass --timeout 120 -- "$worker" train "$@"; fi
}
run --steps 100 --out "$work/a" --tag run || fail "first run"
run --steps 100 --out "$work/b" --tag run || fail "second run"
run --steps 100 --gas 1 --out "$work/c" --tag run || fail "control run"
for r in $(seq 0 $((np - 1))); do
  for f in "losses_rank${r}_run.txt" "final_rank$r.txt"; do
    [[ -s $work/a/$f ]] || fail "rank $r wrote no $f"
    cmp "$work/a/$f" "$work/b/$f" || { diff "$work/a/$f" "$work/b/$f" | head; fail "rank $r: $f differs between two runs"; }
  done
  [[ $(wc -l <"$work/a/losses_rank${r}_run.txt") -eq 100 ]] || fail "rank $r: expected 100 losses"
  if cmp -s "$work/a/final_rank$r.txt" "$work/c/final_rank$r.txt"; then
    fail "rank $r: the control run (other settings) gave the same state: the comparison cannot fail"
  fi
done
# Data parallelism: every rank ends with the same parameters.
p0=$(grep '^params ' "$work/a/final_rank0.txt")
for r in $(seq 1 $((np - 1))); do
  [[ $(grep '^params ' "$work/a/final_rank$r.txt") == "$p0" ]] || fail "rank $r's parameters differ from rank 0's"
done
echo "two runs of 100 steps identical bit for bit ($np process(es))"
