#!/usr/bin/env bash
# Where the GPU time of GPT-2 124M's training step goes (batch 16 x 1024, bf16 autocast, AdamW),
# kernel by kernel, for brisk (bench/gpt2/brisk_bench.sh: 2 warm-up steps + STEPS) and PyTorch
# eager (bench/gpt2/torch_gpt2.py bench: 2 warm-up steps + STEPS), each under Nsight Compute with
# one metric, gpu__time_duration (clocks and caches left as a normal run has them; ncu runs the
# kernels one at a time, so this is each kernel's own time, not the step's wall time). Writes
# OUT/brisk_kernels.csv and OUT/torch_kernels.csv; bench/gpt2/kernel_table.py sums them per kernel
# and per kind of work. Then the first launches of brisk's attention, cross-entropy-backward and
# layer-norm column kernels once more with ncu's analysis sections (speed of light, occupancy,
# launch statistics, warp states, memory and compute workloads) into OUT/brisk_detail.txt: why
# they take what they take. Needs a machine where ncu can read the GPU's counters.
# Usage: bench/gpt2/kernel_profile.sh BUILD OUT [STEPS]     Env: NCU (default: ncu on PATH)
set -euo pipefail
if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
  [[ $# -ge 1 && ($1 == -h || $1 == --help) ]] && exit 0 || exit 2
fi
build=$1
out=$2
steps=${3:-1}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
[[ -x $ncu ]] || {
  echo "kernel_profile: no ncu (set NCU)" >&2
  exit 1
}
mkdir -p "$out"
args="--metrics gpu__time_duration.sum --csv --print-units base --clock-control none --cache-control none"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BRISK_GPT2_LAUNCHER="$ncu $args --log-file $out/brisk_kernels.csv" \
  bash bench/gpt2/brisk_bench.sh "$build" "$tmp/ignored.jsonl" "$steps" > "$tmp/brisk.log" 2>&1 ||
  {
    tail -20 "$tmp/brisk.log" >&2
    exit 1
  }
# shellcheck disable=SC2086  # args is a list of words
"$ncu" $args --log-file "$out/torch_kernels.csv" python3 bench/gpt2/torch_gpt2.py bench --steps "$steps" \
  --warmup 2 > "$tmp/torch.log" 2>&1 || {
  tail -20 "$tmp/torch.log" >&2
  exit 1
}
detail="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats"
detail+=" --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
detail+=" --clock-control none -k regex:attention|cross_entropy_backward|layer_norm_columns --launch-count 8"
BRISK_GPT2_LAUNCHER="$ncu $detail --log-file $out/brisk_detail.txt" \
  bash bench/gpt2/brisk_bench.sh "$build" "$tmp/ignored.jsonl" 1 > "$tmp/detail.log" 2>&1 ||
  tail -5 "$tmp/detail.log" >&2
echo "kernel_profile: $(grep -c gpu__time_duration "$out/brisk_kernels.csv") brisk kernels," \
  "$(grep -c gpu__time_duration "$out/torch_kernels.csv") PyTorch kernels, $((steps + 2)) steps each"
if [[ -f bench/gpt2/kernel_table.py ]]; then
  python3 bench/gpt2/kernel_table.py --steps $((steps + 2)) "$out/brisk_kernels.csv" "$out/torch_kernels.csv"
fi
