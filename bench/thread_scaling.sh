#!/usr/bin/env bash
# brisk's own 2-thread training speed against its 1-thread speed: PAIRS pairs of
# `fashion_mnist --bench STEPS --workers 0`, one run on 1 thread and one on 2 (which goes first
# alternates), each pair between two probes of the two CPUs' cache-line round trip
# (bench/core_to_core). Prints every pair, the median images/s on each thread count (with GFLOP/s
# as a fraction of one core's peak, bench/fma_peak), and the median ratio over all pairs, then
# over the pairs whose probes both read at most NEAR_NS (the two cores share a cache) and over the
# others: on a VM the host may move its vCPUs between nearby and distant cores while it runs, and
# the ratio follows (see bench/RESULTS.md).
# Usage: bench/thread_scaling.sh [BUILD] [PAIRS] [STEPS]     Env: NEAR_NS (default 200)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
help_if_asked "$@"
build=${1:-build}
pairs=${2:-7}
steps=${3:-600}
near=${NEAR_NS:-200}
brisk=$build/examples/fashion_mnist
probe=$build/bench/core_to_core
require_built "$brisk"
require_built "$probe"
run() { OMP_NUM_THREADS=$1 "$brisk" --bench "$steps" --threads "$1" --workers 0 | sed -n 's/.*images\/s: //p'; }
rt() { "$probe" --repeats 3 --trips 100000 | sed -n 's/.*: \([0-9]*\) ns.*/\1/p'; }
machine_line
measure_peak "$build"
echo "# pair  round-trip-before(ns)  1-thread  2-thread (images/s)  ratio  round-trip-after(ns)"
all=() close=() far=() ones=() twos=()
for ((p = 1; p <= pairs; ++p)); do
  before=$(rt)
  if ((p % 2)); then
    one=$(run 1)
    two=$(run 2)
  else
    two=$(run 2)
    one=$(run 1)
  fi
  after=$(rt)
  ratio=$(awk "BEGIN{printf \"%.3f\", $two / $one}")
  echo "$p  $before  $one  $two  $ratio  $after"
  all+=("$ratio")
  ones+=("$one")
  twos+=("$two")
  if ((before <= near && after <= near)); then close+=("$ratio"); else far+=("$ratio"); fi
done
one=$(median "${ones[@]}")
two=$(median "${twos[@]}")
echo "median images/s: 1 thread $one ($(cnn_of_peak "$one" 1)), 2 threads $two ($(cnn_of_peak "$two" 2))"
echo "median ratio: $(median "${all[@]}") over ${#all[@]} pairs; $(median "${close[@]}") over the ${#close[@]} with both probes <= $near ns; $(median "${far[@]}") over the other ${#far[@]}"
