#!/usr/bin/env bash
# GPT-2 --resume: examples/gpt2 run straight for 20 steps (checkpoints after steps 10 and 20) against
# a run that resumes from the straight run's step-10 checkpoint: steps 11-20 must log the same
# train and validation losses, digit for digit (the model, AdamW, the schedule, the random state
# and the data position all come back).
#
#   run_gpt2_resume.sh GPT2 WORK_DIR
set -u
gpt2=$1; work=$2
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

data=()
if [[ ! -d /usr/share/games/fortunes ]]; then
  awk 'BEGIN { for (i = 0; i < 20000; ++i) printf "line %d: the quick brown fox jumps over %d lazy dogs.\n", i, i % 97 }' \
    >"$work/text.txt"
  data=(--data "$work/text.txt")
fi
args=(--preset tiny --max_steps 20 --warmup_steps 5 --learning_rate 3e-3 --log_every 1 --eval_every 10
      --eval_steps 4 --threads 1 --batch_size 4 "${data[@]}")

OMP_NUM_THREADS=1 "$gpt2" "${args[@]}" --output_dir "$work/straight" >"$work/straight.log" 2>&1 ||
  { cat "$work/straight.log"; fail "the straight run"; }
[[ -f $work/straight/checkpoints/checkpoint_0/state.json ]] || fail "no checkpoint after step 10"
mkdir -p "$work/resumed/checkpoints"
cp -r "$work/straight/checkpoints/checkpoint_0" "$work/resumed/checkpoints/"
OMP_NUM_THREADS=1 "$gpt2" "${args[@]}" --output_dir "$work/resumed" --resume >"$work/resumed.log" 2>&1 ||
  { cat "$work/resumed.log"; fail "the resumed run"; }
grep -q "resumed from .*checkpoint_0 after step 10" "$work/resumed.log" || { cat "$work/resumed.log"; fail "did not resume at step 10"; }

# The losses of steps 11-20 ("step key value"), without tokens/s (a time).
losses() {
  sed -nE 's/.*"step":([0-9]+).*"(loss|val_loss)":([-0-9.eE+]+).*/\1 \2 \3/p' "$1" | awk '$1 > 10'
}
losses "$work/straight/metrics.jsonl" >"$work/straight.txt"
losses "$work/resumed/metrics.jsonl" >"$work/resumed.txt"
[[ $(wc -l <"$work/straight.txt") -eq 11 ]] || { cat "$work/straight.txt"; fail "expected 10 train and 1 validation loss"; }
diff "$work/straight.txt" "$work/resumed.txt" || fail "the resumed run's losses differ from the straight run's"
echo "GPT2-RESUME-OK: steps 11-20 identical after --resume"
