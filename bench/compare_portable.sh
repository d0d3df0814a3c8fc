#!/usr/bin/env bash
# Training speed of the example CNN (bench/compare_cnn.sh's `fashion_mnist --bench`, batch 64,
# Adam) in a native build (-march=native) against a portable one (BRISK_NATIVE=OFF: x86-64
# baseline, hot kernels chosen at run time: docs/cpu-isa.md), the two alternating ROUNDS times per
# thread count so that load from other programs hits both alike. Prints images/s per run, the
# medians and the ratio portable / native, with the load average before and after.
# Usage: bench/compare_portable.sh NATIVE_BUILD PORTABLE_BUILD [steps] [rounds] [thread counts...]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
help_if_asked "$@"
native_dir=$1 portable_dir=$2
native=$native_dir/examples/fashion_mnist
portable=$portable_dir/examples/fashion_mnist
steps=${3:-300}
rounds=${4:-3}
shift $(($# < 4 ? $# : 4))
thread_counts=("$@")
((${#thread_counts[@]})) || thread_counts=(1)
require_built "$native"
require_built "$portable"
machine_line
echo "# portable build's CPU kernels: $(BRISK_CPU_ISA=${BRISK_CPU_ISA:-auto} "$portable_dir/bin/brisk" env 2> /dev/null | sed -n 's/^- CPU kernels: //p')"
for threads in "${thread_counts[@]}"; do
  export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
  n=() p=()
  for ((r = 0; r < rounds; ++r)); do
    n+=("$("$native" --bench "$steps" --threads "$threads" --workers 0 | sed -n 's/.*images\/s: //p')")
    p+=("$("$portable" --bench "$steps" --threads "$threads" --workers 0 | sed -n 's/.*images\/s: //p')")
  done
  nm=$(median "${n[@]}")
  pm=$(median "${p[@]}")
  echo "threads=$threads native images/s: ${n[*]} (median $nm); portable images/s: ${p[*]} (median $pm); portable/native $(awk "BEGIN{printf \"%.3f\", $pm/$nm}"); load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
