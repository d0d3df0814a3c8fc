#!/usr/bin/env bash
# GPT-2 data-parallel: examples/gpt2 under `brisk launch -n 2` with --batch_size 4 per process
# trains as one process with --batch_size 8: the same windows each step (each rank takes every
# other batch of the same seeded order), the same gradients (averaged across ranks), so the same
# train and validation losses at every step, up to float rounding. So does one process with
# --batch_size 4 and --gradient_accumulation_steps 2 (two consecutive batches of 4 per step; it
# validates on the same windows with --eval_steps 8, as evaluations count batches). The
# text is Debian's fortunes when installed, else one generated here.
#
#   run_gpt2_dp.sh GPT2 BRISK_CLI TEST_JOB WORK_DIR
set -u
gpt2=$1; brisk=$2; job=$3; work=$4
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

data=()
if [[ ! -d /usr/share/games/fortunes ]]; then
  awk 'BEGIN { for (i = 0; i < 20000; ++i) printf "line %d: the quick brown fox jumps over %d lazy dogs.\n", i, i % 97 }' \
    >"$work/text.txt"
  data=(--data "$work/text.txt")
fi
args=(--preset tiny --max_steps 20 --warmup_steps 5 --learning_rate 3e-3 --log_every 1 --eval_every 10
      --threads 1 "${data[@]}")

OMP_NUM_THREADS=1 "$gpt2" "${args[@]}" --batch_size 8 --eval_steps 4 --output_dir "$work/np1" >"$work/np1.log" 2>&1 ||
  { cat "$work/np1.log"; fail "1 process"; }
XDG_CONFIG_HOME="$work/xdg" OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 \
  "$job" --ranks 2 --timeout 200 -- "$brisk" launch -n 2 "$job" --rank -- \
  "$gpt2" "${args[@]}" --batch_size 4 --eval_steps 4 --output_dir "$work/np2" >"$work/np2.log" 2>&1 ||
  { cat "$work/np2.log"; fail "2 processes"; }
grep -q "2 process(es) x batch 4" "$work/np2.log" || { cat "$work/np2.log"; fail "the launched run was not 2 processes"; }
OMP_NUM_THREADS=1 "$gpt2" "${args[@]}" --batch_size 4 --gradient_accumulation_steps 2 --eval_steps 8 --output_dir "$work/acc2" \
  >"$work/acc2.log" 2>&1 || { cat "$work/acc2.log"; fail "1 process with accumulation"; }

# "step key value" for every loss and val_loss of metrics.jsonl.
losses() {
  sed -nE 's/.*"step":([0-9]+).*"(loss|val_loss)":([-0-9.eE+]+).*/\1 \2 \3/p' "$1"
}
losses "$work/np1/metrics.jsonl" >"$work/np1.txt"
[[ $(wc -l <"$work/np1.txt") -eq 22 ]] || { cat "$work/np1.txt"; fail "expected 20 train and 2 validation losses"; }
compare() {  # $1: the run compared with np1, $2: what it is
  losses "$work/$1/metrics.jsonl" >"$work/$1.txt"
  paste -d' ' "$work/np1.txt" "$work/$1.txt" | awk -v what="$2" '
    { if (NF != 6 || $1 != $4 || $2 != $5) { print "FAIL: the runs logged different things: " $0; bad = 1; next }
      d = $3 - $6; if (d < 0) d = -d; r = d / ($3 < 0 ? -$3 : $3); if (r > worst) worst = r;
      if (r > 1e-5) { print "FAIL: step " $1 " " $2 ": 1 process x batch 8 " $3 ", " what " " $6; bad = 1 } }
    END { printf "%s: largest relative difference %.2e over %d losses\n", what, worst, NR; exit bad }' ||
    fail "$2 do not train as 1 process x batch 8"
}
compare np2 "2 processes x batch 4"
compare acc2 "1 process x batch 4 x 2 accumulation steps"
echo "GPT2-DP-OK: 2 processes x batch 4 = 1 process x batch 4 x 2 accumulation steps = 1 process x batch 8"
