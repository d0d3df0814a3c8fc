#!/usr/bin/env bash
# examples/gpt2 --bench on GPT-2 124M at batch 16 x 1024 in bf16 (the peer of torch_gpt2.py bench),
# on random tokens in llm.c's format (no text needed); appends a JSON line to JSONL (with the
# BRISK_SHARDING stage it ran under, when that is set). BRISK_GPT2_CUDA_GRAPH=1 adds --cuda_graph;
# BRISK_GPT2_LAUNCHER, words put before the program (a profiler: bench/gpt2/kernel_profile.sh);
# BRISK_GPT2_PRESET (124M) and BRISK_GPT2_BATCH (16) change the model and the batch.
# Usage: bench/gpt2/brisk_bench.sh BUILD JSONL [STEPS]
set -euo pipefail
if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  sed -n '2,7s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
  [[ $# -ge 1 && ($1 == -h || $1 == --help) ]] && exit 0 || exit 2
fi
build=$1
jsonl=$2
steps=${3:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/tokens.bin" << 'EOF'
import random, struct, sys
random.seed(0)
n = 1 << 20
with open(sys.argv[1], "wb") as f:  # llm.c's header: magic, version, token count, then uint16 tokens
    f.write(struct.pack("<256i", 20240520, 1, n, *[0] * 253))
    f.write(struct.pack("<%dH" % n, *(random.randrange(50257) for _ in range(n))))
EOF
graph=()
[[ ${BRISK_GPT2_CUDA_GRAPH:-0} == 1 ]] && graph=(--cuda_graph)
read -r -a launcher <<< "${BRISK_GPT2_LAUNCHER:-}"
preset=${BRISK_GPT2_PRESET:-124M}
batch=${BRISK_GPT2_BATCH:-16}
"${launcher[@]}" "$build/examples/gpt2" --preset "$preset" --batch_size "$batch" --mixed_precision bf16 --train_bin "$tmp/tokens.bin" \
  --output_dir "$tmp/out" --bench "$steps" "${graph[@]}" 2>&1 | tee "$tmp/log.txt"
python3 - "$tmp/log.txt" "$jsonl" "$steps" "$preset" "$batch" << 'EOF'
import json, re, sys
t = open(sys.argv[1]).read()
def num(pat):
    m = re.search(pat, t)
    return float(m.group(1)) if m else None
import os
row = dict(mode="bench", impl="brisk", preset=sys.argv[4], batch=int(sys.argv[5]), seq=1024, mixed_precision="bf16",
           sharding=os.environ.get("BRISK_SHARDING") or "none",
           cuda_graph=os.environ.get("BRISK_GPT2_CUDA_GRAPH") == "1",
           dgelu_epilogue=os.environ.get("BRISK_CUDA_DGELU_EPILOGUE") or "dgelu",
           steps=int(sys.argv[3]), tokens_per_s=num(r"train tokens/s: ([0-9.]+)"),
           mfu=(lambda v: v / 100 if v is not None else None)(num(r"MFU: ([0-9.]+) %")),
           step_ms=num(r"step ([0-9.]+) ms"),
           attention=(lambda m: m.group(1) if m else None)(re.search(r"attention: ([^\n]+)", t)),
           # --cuda_graph: the peak up to the end of the capture (the replays allocate nothing).
           peak_bytes=num(r"end of the capture.*total ([0-9]+)") or num(r", total ([0-9]+)"))
if row["tokens_per_s"] is None:
    sys.exit("brisk_bench.sh: no 'train tokens/s' in the output")
with open(sys.argv[2], "a") as f:
    f.write(json.dumps(row) + "\n")
print(json.dumps(row))
EOF
