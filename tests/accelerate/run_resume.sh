#!/usr/bin/env bash
# Checkpoint resume, bit for bit: a straight run of 200 micro-steps against SAVE_AT steps +
# save_state + exit, then a NEW process that load_state()s and runs the rest (the save falls in the
# middle of an epoch; with gradient_accumulation_steps 2 an odd SAVE_AT falls inside an
# accumulation window, where every rank holds its own unsynchronised gradients, and the test checks
# that every rank says so). Losses, parameters, optimizer and scheduler state, RNG state and the
# loader position must be identical on every rank. With one process, also: a save killed half-way
# (the writer SIGKILLs itself after 2 files) leaves the earlier checkpoint loadable and the partial
# one ignored.
#
#   run_resume.sh NP WORKER TEST_JOB WORK_DIR [SAVE_AT (100)]   (TEST_JOB: brisk_test_job, which runs the mpirun jobs)
set -u
np=$1; worker=$2; run_mpi=$3; work=$4; save_at=${5:-100}
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() {
  if [[ $np == 1 ]]; then OMP_NUM_THREADS=1 "$worker" train "$@"
  else "$run_mpi" --np "$np" --expect pass --timeout 120 -- "$worker" train "$@"; fi
}
ranks=$(seq 0 $((np - 1)))

run --steps 200 --out "$work/straight" --tag straight || fail "straight run"
run --steps 200 --save-at "$save_at" --stop-at "$save_at" --out "$work/split" --tag part1 | tee "$work/part1.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "first half"
[[ -f $work/split/checkpoints/checkpoint_0/manifest.json ]] || fail "no checkpoint_0 after the first half"
if (( save_at % 2 == 1 )); then
  for r in $ranks; do
    grep -q "rank $r saved .* inside an accumulation window" "$work/part1.log" ||
      fail "rank $r did not save inside an accumulation window"
  done
fi
run --steps 200 --resume --out "$work/split" --tag part2 | tee "$work/part2.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "second half"
grep -q "loaded .*checkpoint_0 at step $save_at" "$work/part2.log" || fail "part 2 did not resume from checkpoint_0"

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

if [[ $np -gt 1 ]]; then
  # Damage that only the last rank sees (a byte of its own rank file): the job must fail and
  # not hang; that rank names the file, the others are told through an all-reduce (mpirun may
  # kill them, or drop the last words of the first rank to exit, so either message will do).
  last=$((np - 1))
  cp -r "$work/split/checkpoints/checkpoint_0" "$work/damaged"
  printf 'X' | dd of="$work/damaged/rank_$last.json" bs=1 seek=3 conv=notrunc 2>/dev/null
  "$run_mpi" --np "$np" --expect fail --timeout 60 \
    --grep "FAIL rank [0-9]+: Accelerator::load_state: .*(rank_$last.json's SHA-256 does not match|another rank failed)" \
    -- "$worker" train --steps 200 --load "$work/damaged" --out "$work/damaged_run" --tag damaged ||
    fail "a checkpoint damaged for one rank only"
  echo "damage seen by one rank only fails every rank"
fi

if [[ $np == 1 ]]; then
  rm -f "$work"/split/final_rank*.txt
  # Resume at SAVE_AT, save again 50 steps later, but die after writing 2 files of that save.
  BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES=2 OMP_NUM_THREADS=1 "$worker" train --steps 200 --resume \
    --save-at $((save_at + 50)) --stop-at $((save_at + 50)) --out "$work/split" --tag killed
  rc=$?
  [[ $rc -eq 137 ]] || fail "the killed save exited $rc, expected 137 (SIGKILL)"
  [[ -d $work/split/checkpoints/.checkpoint_1.partial ]] || fail "no partial folder left by the killed save"
  [[ ! -e $work/split/checkpoints/checkpoint_1 ]] || fail "the killed save published checkpoint_1"
  run --steps 200 --resume --out "$work/split" --tag part3 | tee "$work/part3.log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || fail "resume after the kill"
  grep -q "loaded .*checkpoint_0 at step $save_at" "$work/part3.log" || fail "did not fall back to checkpoint_0"
  compare part3
  echo "a save killed half-way is ignored; the previous checkpoint loads"
fi
echo "RESUME-OK"
