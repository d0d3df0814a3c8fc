#!/usr/bin/env bash
# Checkpoint resume, bit for bit: a straight run of 200 micro-steps against 100 steps + save_state
# + exit, then a NEW process that load_state()s and runs the other 100 (the save falls in the
# middle of an epoch). Losses, parameters, optimizer and scheduler state, RNG state and the loader
# position must be identical. With one process, also: a save killed half-way (the writer SIGKILLs
# itself after 2 files) leaves the earlier checkpoint loadable and the partial one ignored.
#
#   run_resume.sh NP WORKER TEST_JOB WORK_DIR   (TEST_JOB: brisk_test_job, which runs the mpirun jobs)
set -u
np=$1; worker=$2; run_mpi=$3; work=$4
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() {
  if [[ $np == 1 ]]; then OMP_NUM_THREADS=1 "$worker" train "$@"
  else "$run_mpi" --np "$np" --expect pass --timeout 120 -- "$worker" train "$@"; fi
}
ranks=$(seq 0 $((np - 1)))

run --steps 200 --out "$work/straight" --tag straight || fail "straight run"
run --steps 200 --save-at 100 --stop-at 100 --out "$work/split" --tag part1 || fail "first half"
[[ -f $work/split/checkpoints/checkpoint_0/manifest.json ]] || fail "no checkpoint_0 after the first half"
run --steps 200 --resume --out "$work/split" --tag part2 | tee "$work/part2.log" || fail "second half"
grep -q "loaded .*checkpoint_0 at step 100" "$work/part2.log" || fail "part 2 did not resume from checkpoint_0"

compare() {  # $1: the resumed run's second loss file tag
  for r in $ranks; do
    cat "$work/split/losses_rank${r}_part1.txt" "$work/split/losses_rank${r}_$1.txt" >"$work/joined_$r.txt"
    cmp "$work/straight/losses_rank${r}_straight.txt" "$work/joined_$r.txt" || fail "rank $r: losses differ ($1)"
    cmp "$work/straight/final_rank$r.txt" "$work/split/final_rank$r.txt" || {
      diff "$work/straight/final_rank$r.txt" "$work/split/final_rank$r.txt"; fail "rank $r: final state differs ($1)"; }
  done
  [[ $(wc -l <"$work/joined_0.txt") -eq 200 ]] || fail "expected 200 losses"
}
compare part2
echo "resumed run identical bit for bit ($np process(es))"

if [[ $np == 1 ]]; then
  rm -f "$work"/split/final_rank*.txt
  # Resume at 100, save again at 150, but die after writing 2 files of that save.
  BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES=2 OMP_NUM_THREADS=1 "$worker" train --steps 200 --resume --save-at 150 \
    --stop-at 150 --out "$work/split" --tag killed
  rc=$?
  [[ $rc -eq 137 ]] || fail "the killed save exited $rc, expected 137 (SIGKILL)"
  [[ -d $work/split/checkpoints/.checkpoint_1.partial ]] || fail "no partial folder left by the killed save"
  [[ ! -e $work/split/checkpoints/checkpoint_1 ]] || fail "the killed save published checkpoint_1"
  run --steps 200 --resume --out "$work/split" --tag part3 | tee "$work/part3.log" || fail "resume after the kill"
  grep -q "loaded .*checkpoint_0 at step 100" "$work/part3.log" || fail "did not fall back to checkpoint_0"
  compare part3
  echo "a save killed half-way is ignored; the previous checkpoint loads"
fi
echo "RESUME-OK"
