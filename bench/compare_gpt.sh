#!/usr/bin/env bash
# Side-by-side training speed of a small GPT (6 layers, 6 heads, width 384, context 256, byte
# vocabulary, batch 8, AdamW, fp32): bench/gpt_bench (brisk) against bench/libtorch_gpt (the same
# model in libtorch, built when Debian's libtorch-dev is installed), alternating the two ROUNDS
# times per thread count so load from other programs hits both alike. Prints the BLAS libtorch
# runs on (it refuses the reference BLAS: apt-get install libopenblas0), the CPU, the load
# average, both parameter counts and first losses, tokens/s and GFLOP/s per run and the median
# ratio. Both programs get the same thread budget (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, --threads).
# GFLOP/s are the programs' own (6N + 12LTd per token, see bench/gpt_bench.cpp), shown beside as a
# fraction of T cores' peak measured by bench/fma_peak when it is built.
# Usage: bench/compare_gpt.sh [build dir] [steps] [rounds] [thread counts...]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
help_if_asked "$@"
build=${1:-build}
steps=${2:-5}
rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
thread_counts=("$@")
((${#thread_counts[@]})) || thread_counts=(1 2)
brisk=$build/bench/gpt_bench
torch=$build/bench/libtorch_gpt
require_built "$brisk"
build_target "$build" libtorch_gpt
require_built "$torch" "apt-get install libtorch-dev, then re-run cmake"
field() { sed -n "s|.*$1: \([0-9.]*\).*|\1|p" <<<"$2" | head -1; }
machine_line
measure_peak "$build"
for threads in "${thread_counts[@]}"; do
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
  bt=() tt=() bg=() tg=()
  for ((r = 0; r < rounds; ++r)); do
    bo=$("$brisk" --steps "$steps" --threads "$threads")
    to=$("$torch" --steps "$steps" --threads "$threads")
    if ((r == 0 && threads == ${thread_counts[0]})); then
      grep -E '^(blas:|libtorch .*parameters|training FLOPs)' <<<"$to"
      grep -E 'parameters' <<<"$bo"
    fi
    echo "  threads=$threads round $((r + 1)): brisk losses $(grep -E '^warm-up' <<<"$bo" | sed 's/.*loss \([0-9.]*\).*/\1/' | xargs) last $(sed -n 's|^last loss \([0-9.]*\).*|\1|p' <<<"$bo");" \
      "libtorch losses $(grep -E '^warm-up' <<<"$to" | sed 's/.*loss \([0-9.]*\).*/\1/' | xargs) last $(sed -n 's|^last loss \([0-9.]*\).*|\1|p' <<<"$to")"
    bt+=("$(field 'tokens/s' "$bo")") bg+=("$(field 'GFLOP/s' "$bo")")
    tt+=("$(field 'tokens/s' "$to")") tg+=("$(field 'GFLOP/s' "$to")")
  done
  bm=$(median "${bt[@]}") tm=$(median "${tt[@]}")
  echo "threads=$threads brisk tokens/s: ${bt[*]} (median $bm, $(of_peak "$(median "${bg[@]}")" "$threads")); libtorch tokens/s: ${tt[*]}" \
    "(median $tm, $(of_peak "$(median "${tg[@]}")" "$threads")); ratio $(awk "BEGIN{printf \"%.2f\", $bm/$tm}"); load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
