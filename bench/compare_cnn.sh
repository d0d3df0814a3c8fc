#!/usr/bin/env bash
# Side-by-side training speed of the example CNN (batch 64, Adam): brisk's
# `fashion_mnist --bench` against the same network in libtorch (bench/libtorch_cnn, built when
# Debian's libtorch-dev is installed), alternating the two ROUNDS times per thread count so
# load from other programs hits both alike. Prints the BLAS libtorch runs on (it refuses the
# reference BLAS: apt-get install libopenblas0), the CPU, the load average, images/s per run and
# the median ratio. Both programs get the same thread budget: OMP_NUM_THREADS and
# OPENBLAS_NUM_THREADS are set to the thread count, and each is also told --threads; brisk builds
# its batches in the training thread (--workers 0) rather than in a loader thread of its own.
# GFLOP/s = images/s x 8.29 MFLOP, the multiply-adds (x2) of one image's training step: forward
# 1,420,032 multiply-adds (conv1 28*28*16*9 = 112,896; conv2 14*14*32*16*9 = 903,168; fc1
# 1568*256 = 401,408; fc2 256*10 = 2,560), the same again for the weight gradients, and again for
# the input gradients of all layers but conv1 (its input is data): 2 * (3 * 1,420,032 - 112,896)
# = 8,294,400 FLOP; pooling, ReLU, the loss and Adam are left out. Shown beside it as a fraction
# of T cores' peak measured by bench/fma_peak when it is built.
# Usage: bench/compare_cnn.sh [build dir] [steps] [rounds] [thread counts...]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
help_if_asked "$@"
build=${1:-build}
steps=${2:-300}
rounds=${3:-5}
shift $(($# < 3 ? $# : 3))
thread_counts=("$@")
((${#thread_counts[@]})) || thread_counts=(1 2)
brisk=$build/examples/fashion_mnist
torch=$build/bench/libtorch_cnn
require_built "$brisk"
build_target "$build" libtorch_cnn
require_built "$torch" "apt-get install libtorch-dev, then re-run cmake"
machine_line
measure_peak "$build"
# One short libtorch run up front: the BLAS line, and a refusal stops the script here.
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$torch" --steps 1 --threads 1 | grep '^blas:'
for threads in "${thread_counts[@]}"; do
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
  b=() t=()
  for ((r = 0; r < rounds; ++r)); do
    b+=("$("$brisk" --bench "$steps" --threads "$threads" --workers 0 | sed -n 's/.*images\/s: //p')")
    t+=("$("$torch" --steps "$steps" --threads "$threads" | sed -n 's/.*images\/s: //p')")
  done
  bm=$(median "${b[@]}")
  tm=$(median "${t[@]}")
  echo "threads=$threads brisk images/s: ${b[*]} (median $bm: $(cnn_of_peak "$bm" "$threads")); libtorch images/s: ${t[*]} (median $tm: $(cnn_of_peak "$tm" "$threads")); ratio $(awk "BEGIN{printf \"%.2f\", $bm/$tm}"); load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
