#!/usr/bin/env bash
# Step time and peak memory per process of GPT-2 under plain data parallelism and ZeRO stages 1-3
# (docs/sharding.md) on the CPU: examples/gpt2 --bench under mpirun (one thread per process, MPI
# yielding while it waits, as `brisk launch` sets it), the four stages alternating per round.
# Prints each run's train tokens/s and the main process's peak bytes, then the median per stage.
#   bench/zero_gpt2.sh BUILD_DIR [PRESET=tiny] [PROCESSES=2] [ROUNDS=3] [STEPS=20]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
help_if_asked "$@"
build=${1:?usage: zero_gpt2.sh BUILD_DIR [PRESET] [PROCESSES] [ROUNDS] [STEPS]}
preset=${2:-tiny}
np=${3:-2}
rounds=${4:-3}
steps=${5:-20}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
stages=(none zero1 zero2 zero3)
declare -A runs peaks
for ((r = 0; r < rounds; ++r)); do
  for s in "${stages[@]}"; do
    # A failing run prints its output and stops the script (not a silent exit under set -e).
    log=$(BRISK_SHARDING=$s OMP_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 mpirun --allow-run-as-root --oversubscribe \
      -np "$np" "$build/examples/gpt2" --preset "$preset" --bench "$steps" --output-dir "$out/$s" 2>&1) ||
      { echo "$log" >&2; echo "zero_gpt2: the $s run failed" >&2; exit 1; }
    v=$(sed -n 's/^train tokens\/s: //p' <<< "$log")
    peaks[$s]=$(sed -n 's/^peak bytes (main process): //p' <<< "$log")
    [[ -n $v ]] || { echo "$log" >&2; exit 1; }
    echo "round $r $s $v tokens/s"
    runs[$s]+="$v "
  done
done
for s in "${stages[@]}"; do
  median=$(tr ' ' '\n' <<< "${runs[$s]}" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "median $s $median tokens/s; peak bytes: ${peaks[$s]}"
done
