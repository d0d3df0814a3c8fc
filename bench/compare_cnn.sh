#!/usr/bin/env bash
# Side-by-side training speed of the example CNN (batch 64, Adam): brisk's
# `fashion_mnist --bench` against the same network in libtorch (bench/libtorch_cnn, built when
# Debian's libtorch-dev is installed), alternating the two ROUNDS times per thread count so
# load from other programs hits both alike. Prints images/s per run and the median ratio.
# Usage: bench/compare_cnn.sh [build dir] [steps] [rounds]
set -euo pipefail
build=${1:-build}
steps=${2:-300}
rounds=${3:-3}
brisk=$build/examples/fashion_mnist
torch=$build/bench/libtorch_cnn
[[ -x $brisk ]] || { echo "compare_cnn: $brisk not built" >&2; exit 1; }
[[ -x $torch ]] || { echo "compare_cnn: $torch not built (apt-get install libtorch-dev, then re-run cmake)" >&2; exit 1; }
echo "# $(date -u +%Y-%m-%d) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
for threads in 1 2; do
  b=() t=()
  for ((r = 0; r < rounds; ++r)); do
    b+=("$(OMP_NUM_THREADS=$threads "$brisk" --bench "$steps" --threads "$threads" | sed -n 's/.*images\/s: //p')")
    t+=("$("$torch" --steps "$steps" --threads "$threads" | sed -n 's/.*images\/s: //p')")
  done
  bm=$(printf '%s\n' "${b[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p")
  tm=$(printf '%s\n' "${t[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p")
  echo "threads=$threads brisk images/s: ${b[*]} (median $bm); libtorch images/s: ${t[*]} (median $tm); ratio $(awk "BEGIN{printf \"%.2f\", $bm/$tm}")"
done
