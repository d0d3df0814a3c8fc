#!/usr/bin/env bash
# Data-parallel scaling of the example CNN on the CPU: one process x 1 thread against
# `brisk launch -n 2` x 1 thread (same per-process batch), in interleaved rounds, with
# variants of the communication settings beside the default (bench/RESULTS.md, "Data
# parallelism on the CPU"). Prints images/s per run, the ratio to the round's 1-process run,
# and the median ratio per variant.
# Usage: bench/dp_scaling.sh BUILD [ROUNDS] [STEPS] [VARIANT...]
#   VARIANT: NAME=ENV (e.g. "gate=BRISK_COMM_GATE=1"), or the word "independent": two 1-process
#   runs started together, summed (the ceiling: no communication).
#   Default variants: "default=", "gate=BRISK_COMM_GATE=1" (the arrival gate, docs/data-parallel.md)
#   and "independent".
set -euo pipefail
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
  [[ $# -ge 1 && ($1 == -h || $1 == --help) ]] && exit 0 || exit 2
fi
build=$1
rounds=${2:-5}
steps=${3:-300}
shift $(($# < 3 ? $# : 3))
variants=("$@")
((${#variants[@]})) || variants=("default=" "gate=BRISK_COMM_GATE=1" "independent")
fm="$build/examples/fashion_mnist"
ips() { grep -o 'train images/s: [0-9]*' | awk '{print $3}'; }
declare -A ratios
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
  one=$(OMP_NUM_THREADS=1 "$fm" --bench "$steps" --threads 1 --workers 0 | ips)
  line="1p $one"
  for v in "${variants[@]}"; do
    name=${v%%=*}
    if [[ $v == independent ]]; then
      a=$(mktemp)
      OMP_NUM_THREADS=1 "$fm" --bench "$steps" --threads 1 --workers 0 | ips > "$a" &
      b=$(OMP_NUM_THREADS=1 "$fm" --bench "$steps" --threads 1 --workers 0 | ips)
      wait
      two=$(($(cat "$a") + b))
      rm -f "$a"
    else
      # shellcheck disable=SC2086  # the variant's assignments, word by word
      two=$(env OMP_NUM_THREADS=1 ${v#*=} "$build/bin/brisk" launch -n 2 "$fm" --bench "$steps" --threads 1 --workers 0 | ips)
    fi
    ratio=$(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
    ratios[$name]+="$ratio "
    line+=" | $name $two ($ratio)"
  done
  echo "$line"
done
for v in "${variants[@]}"; do
  name=${v%%=*}
  echo "median $name: $(echo "${ratios[$name]}" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }')"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
