#!/usr/bin/env bash
# Step time of plain data parallelism vs ZeRO stages 1 and 2 (docs/sharding.md) on the CPU:
# examples/fashion_mnist --bench under mpirun, the three stages alternating per round; prints
# each run's images/s and the median per stage.
#   bench/zero_step_time.sh BUILD_DIR [PROCESSES=2] [ROUNDS=5] [STEPS=60]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
help_if_asked "$@"
build=${1:?usage: zero_step_time.sh BUILD_DIR [PROCESSES] [ROUNDS] [STEPS]}
np=${2:-2}
rounds=${3:-5}
steps=${4:-60}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A runs
for ((r = 0; r < rounds; ++r)); do
  for s in none zero1 zero2; do
    # As brisk launch does: MPI yields the CPU while it waits instead of spinning.
    v=$(OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 mpirun --allow-run-as-root --oversubscribe -np "$np" "$build/examples/fashion_mnist" \
          --bench "$steps" --workers 0 --sharding "$s" --out "$out/$s" 2>&1 | sed -n 's/^train images\/s: //p')
    echo "round $r $s $v images/s"
    runs[$s]+="$v "
  done
done
for s in none zero1 zero2; do
  median=$(tr ' ' '\n' <<<"${runs[$s]}" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "median $s $median images/s"
done
