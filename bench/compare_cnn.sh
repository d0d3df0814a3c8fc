#!/usr/bin/env bash
# Side-by-side training speed of the example CNN (batch 64, Adam): brisk's
# `fashion_mnist --bench` against the same network in libtorch (bench/libtorch_cnn, built when
# Debian's libtorch-dev is installed), alternating the two ROUNDS times per thread count so
# load from other programs hits both alike. Prints the BLAS libtorch runs on (it refuses the
# reference BLAS: apt-get install libopenblas0), the CPU, the load average, images/s per run and
# the median ratio. Both programs get the same thread budget: OMP_NUM_THREADS and
# OPENBLAS_NUM_THREADS are set to the thread count, and each is also told --threads.
# Usage: bench/compare_cnn.sh [build dir] [steps] [rounds] [thread counts...]
set -euo pipefail
build=${1:-build}
steps=${2:-300}
rounds=${3:-5}
shift $(($# < 3 ? $# : 3))
thread_counts=("$@")
((${#thread_counts[@]})) || thread_counts=(1 2)
brisk=$build/examples/fashion_mnist
torch=$build/bench/libtorch_cnn
[[ -x $brisk ]] || { echo "compare_cnn: $brisk not built" >&2; exit 1; }
[[ -x $torch ]] || { echo "compare_cnn: $torch not built (apt-get install libtorch-dev, then re-run cmake)" >&2; exit 1; }
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# One short libtorch run up front: the BLAS line, and a refusal stops the script here.
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$torch" --steps 1 --threads 1 | grep '^blas:'
for threads in "${thread_counts[@]}"; do
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
  b=() t=()
  for ((r = 0; r < rounds; ++r)); do
    b+=("$("$brisk" --bench "$steps" --threads "$threads" | sed -n 's/.*images\/s: //p')")
    t+=("$("$torch" --steps "$steps" --threads "$threads" | sed -n 's/.*images\/s: //p')")
  done
  bm=$(median "${b[@]}")
  tm=$(median "${t[@]}")
  echo "threads=$threads brisk images/s: ${b[*]} (median $bm); libtorch images/s: ${t[*]} (median $tm); ratio $(awk "BEGIN{printf \"%.2f\", $bm/$tm}"); load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
