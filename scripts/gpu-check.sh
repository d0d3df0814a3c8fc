#!/usr/bin/env bash
# One GPU window's work, on a GPU machine (see scripts/gpu-build.sh): builds, then runs the stages
# named (default: all, in this order), each within what is left of a time budget, and writes
# every log and figure into OUT:
#   env       nvidia-smi, the driver, python3's torch, the tools found
#   test      ctest -L cuda (junit XML and counts of run / passed / skipped)
#   sdpa      cuDNN's fused attention (issue 31), for a short window: its tests and test_attention's
#             against the CPU (OUT/sdpa_test.xml, OUT/sdpa_test.log), then bench_gpu's attention
#             group at GPT-2 124M's shape, cuDNN against brisk's kernels forward and forward +
#             backward, into OUT/sdpa_bench.jsonl (BRISK_BUILD_TARGETS="test_cuda bench_gpu"
#             gpu-check.sh DEPS OUT env sdpa). Each half is left out when the test or bench stage
#             runs too (they cover it).
#   norm      layer norm and softmax (issue 31), for a short window: the layer-norm, softmax and
#             every-op tests (OUT/norm_test.xml, OUT/norm_test.log), then bench_gpu's copy and rows
#             groups (rows of 50,304 now and before, layer norm's backward in one pass against the
#             split kernels at GPT-2 124M's shape) into OUT/bench_gpu.jsonl
#             (BRISK_BUILD_TARGETS="test_cuda bench_gpu" gpu-check.sh DEPS OUT env norm). Each half
#             is left out when the test or bench stage runs too.
#   det       issue 31's determinism and nan_watch checks, for a short window: with deterministic on,
#             two trainings of the example CNN and of GPT-2 tiny (fp32 and bf16) give the same
#             parameter bytes, and nan_watch names the first non-finite gradient as the CPU does
#             (tests/cuda/test_determinism_gpu.cpp, with the recording-mode counts of
#             test_step_checks_recorded.cpp) into OUT/det_test.xml and OUT/det_test.log
#             (BRISK_BUILD_TARGETS=test_cuda gpu-check.sh DEPS OUT env det). Left out when the test
#             stage runs too (it covers them).
#   bench     bench/gpu/bench_gpu (copy bandwidth, elementwise, rows, matmul vs cuBLASLt, fused vs
#             blocked attention, CNN), and the CNN's per-op host profile (BRISK_PROFILE) into
#             OUT/cnn_profile.txt
#   torch     bench/gpu/torch_cnn.py, the PyTorch peer of the CNN figure (eager and compile)
#   memcheck  compute-sanitizer memcheck on the every-op test (where the tool is there and works)
#   train     examples/fashion_mnist on the GPU in fp32 and in bf16 (8 epochs each)
#   trainsh   scripts/train.sh --epochs 1 (the main job's script, on this machine's GPU)
#   gpt2      GPT-2 124M against PyTorch: bench/gpt2/gpt2_reference + torch_gpt2.py check (loss,
#             logits, gradients, 10 AdamW steps; fp32 and bf16) into OUT/gpt2_check.jsonl, then the
#             training step at batch 16 x 1024 in bf16, brisk (bench/gpt2/brisk_bench.sh, eager and
#             with --cuda_graph) and PyTorch eager in alternating rounds, into OUT/gpt2_bench.jsonl;
#             and Hugging Face tokenizers' own small BPE and encodings (scripts/hf_bpe_fixtures.py)
#             into OUT/bpe_hf, to be committed as tests/data/fixtures/bpe_hf
#   dgelu     GPT-2 124M's step under each BRISK_CUDA_DGELU_EPILOGUE (dgelu, bgrad, off: how the MLP's
#             GELU backward runs) and PyTorch eager, in alternating rounds, into OUT/gpt2_dgelu.jsonl
#   gpt2_350m GPT-2 350M at the largest batch of BRISK_GPT2_350M_BATCHES (48 32 16) at which brisk and
#             PyTorch eager both run, into OUT/gpt2_350m.jsonl (the compile stage adds torch.compile
#             at that batch)
#   aln       bench/bench_add_layer_norm's GPU cases (the fused residual add + LayerNorm against the
#             unfused kernels), into OUT/add_layer_norm.json (needs Google Benchmark to run there)
#   zero      the same brisk step under BRISK_SHARDING none, zero1, zero2, zero3 (a world of one:
#             the sharded code paths on the GPU), into OUT/zero_gpu.jsonl
#   profile   bench/gpt2/kernel_profile.sh: every kernel of GPT-2 124M's training step, brisk's and
#             PyTorch's, under Nsight Compute, summed per kind of work (OUT/profile/table.txt)
#   compile   torch.compile's GPT-2 step (torch_gpt2.py bench --compile): 124M into
#             OUT/gpt2_bench.jsonl (unless only gpt2_350m ran), and with gpt2_350m, 350M at its batch
#             into OUT/gpt2_350m.jsonl; last of all: each compilation takes a minute or more.
# OUT/check.log holds everything printed; OUT/summary.json what scripts/gpu-results.py needs to
# write bench/results/gpu-<date>.json.
# Usage: scripts/gpu-check.sh DEPS OUT [stage...]
# Env: BRISK_CHECK_SECONDS (540: the whole budget, build included), BRISK_BUILD_DIR (build),
#      BRISK_CHECK_COMMIT (the commit to record; default: git rev-parse HEAD),
#      BRISK_BUILD_TARGETS (default: what the stages run), BRISK_TRAIN_EPOCHS (8),
#      BRISK_BENCH_ONLY (bench_gpu's --only groups; default: all), BRISK_GPT2_ROUNDS (2: alternating
#      brisk / PyTorch rounds of the GPT-2 step), BRISK_CTEST_TIMEOUT (300: seconds per test in the
#      test stage; a short window sets less, so that one hung test cannot take the window).
set -uo pipefail

if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  if [[ $# -ge 1 && ($1 == -h || $1 == --help) ]]; then exit 0; else exit 2; fi
fi
deps=$1
out=$2
shift 2
stages=("$@")
((${#stages[@]})) || stages=(env test sdpa norm det bench torch memcheck train trainsh aln gpt2 dgelu gpt2_350m zero profile compile)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee -a "$out/check.log") 2>&1
budget=${BRISK_CHECK_SECONDS:-540}
build=${BRISK_BUILD_DIR:-build}
epochs=${BRISK_TRAIN_EPOCHS:-8}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
has() {
  local s
  for s in "${stages[@]}"; do [[ $s == "$1" ]] && return 0; done
  return 1
}
summary=$out/summary.json
echo "{" > "$summary"
put() { printf '  "%s": %s,\n' "$1" "$2" >> "$summary"; }
# stage NAME SECONDS_RESERVED_FOR_LATER COMMAND...: runs the command within what is left.
stage() {
  local name=$1 reserve=$2
  shift 2
  local t=$(($(left) - reserve))
  if ((t < 10)); then
    echo "=== $name: skipped, no time left"
    put "stage_$name" '"skipped: no time"'
    return 1
  fi
  echo "=== $name (up to ${t}s) $(date -u +%H:%M:%S)"
  local s0=$SECONDS rc=0
  timeout -k 5 "$t" "$@" || rc=$?
  echo "=== $name: rc $rc in $((SECONDS - s0))s"
  put "stage_$name" "{\"rc\": $rc, \"seconds\": $((SECONDS - s0))}"
  return $rc
}

put date "\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\""
# The device machine's copy of the checkout may not carry the history: BRISK_CHECK_COMMIT names it.
put commit "\"${BRISK_CHECK_COMMIT:-$(git rev-parse HEAD 2> /dev/null || echo unknown)}\""
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -1)
put gpu "\"${gpu%%,*}\""
put driver "\"$(echo "${gpu#*,}" | tr -d ' ')\""

if has env; then
  nvidia-smi || true
  nvcc --version | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.backends.cudnn.version())' || true
  command -v compute-sanitizer ncu cmake ninja g++ || true
  ldconfig -p | grep -E "libcrypto.so.3|libz.so.1" || true
  ls /usr/include/openssl/evp.h 2> /dev/null || echo "no OpenSSL headers"
  nproc
  free -g | head -2
fi

targets=${BRISK_BUILD_TARGETS:-test_cuda bench_gpu fashion_mnist brisk_cli brisk_test_job gpt2 gpt2_reference}
if ! BRISK_BUILD_TARGETS=$targets stage build 60 bash scripts/gpu-build.sh "$deps"; then
  echo "=== build failed: nothing else runs"
  echo "  \"done\": true" >> "$summary"
  echo "}" >> "$summary"
  exit 1
fi
# shellcheck source=/dev/null
source "$build/gpu-env.sh"

if has test; then
  stage test 60 ctest --test-dir "$build" -L cuda -j 8 --timeout "${BRISK_CTEST_TIMEOUT:-300}" --output-on-failure \
    --output-junit "$out/ctest-cuda.xml"
  if [[ -f $out/ctest-cuda.xml ]]; then
    put tests "$(python3 - "$out/ctest-cuda.xml" << 'EOF'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
cases = r.findall(".//testcase")
status = [c.get("status", "") for c in cases]
skipped = sum(1 for c in cases if c.find("skipped") is not None or c.get("status") in ("notrun", "disabled"))
failed = sum(1 for c in cases if c.find("failure") is not None or c.get("status") == "fail")
print('{"run": %d, "passed": %d, "failed": %d, "skipped": %d}' % (len(cases), len(cases) - failed - skipped, failed, skipped))
EOF
)"
  fi
fi

if has sdpa; then
  # Short on purpose: the tests first (they say whether cuDNN's plans build and agree), then the
  # timing; each gets at most what is left after reserving time for the stages after it.
  has test || stage sdpa_test 60 bash -c '"$1" --gtest_filter="AttentionPlanCache.*:AttentionBackendSetting.*:CudnnAttention*:CudaAttention*" \
    --gtest_output="xml:$2/sdpa_test.xml" > "$2/sdpa_test.log" 2>&1; rc=$?; tail -30 "$2/sdpa_test.log"; exit $rc' \
    _ "$build/tests/test_cuda" "$out"
  has bench || stage sdpa_bench 60 "$build/bench/gpu/bench_gpu" --only attention --json "$out/sdpa_bench.jsonl"
fi
if has norm; then
  has test || stage norm_test 60 bash -c '"$1" --gtest_filter="*LayerNorm*:*Softmax*:CudaOps.EveryOpMatchesTheCpu" \
    --gtest_output="xml:$2/norm_test.xml" > "$2/norm_test.log" 2>&1; rc=$?; tail -30 "$2/norm_test.log"; exit $rc' \
    _ "$build/tests/test_cuda" "$out"
  has bench || stage norm_bench 60 "$build/bench/gpu/bench_gpu" --only copy,rows --json "$out/bench_gpu.jsonl"
fi
if has det; then
  has test || stage det_test 60 bash -c '"$1" --gtest_filter="DeterministicTrainingOnTheGpu.*:NanWatchOnTheGpu.*:StepChecksRecorded.*" \
    --gtest_output="xml:$2/det_test.xml" > "$2/det_test.log" 2>&1; rc=$?; tail -30 "$2/det_test.log"; exit $rc' \
    _ "$build/tests/test_cuda" "$out"
fi
if has bench; then
  stage bench 60 "$build/bench/gpu/bench_gpu" --only "${BRISK_BENCH_ONLY:-copy,elementwise,rows,matmul,attention,cnn}" \
    --json "$out/bench_gpu.jsonl"
  # Where the CNN's step goes: brisk's per-op profile (host time per op) of 300 steps.
  BRISK_PROFILE="$out/cnn_profile.txt" stage cnn_profile 50 "$build/bench/gpu/bench_gpu" --only cnn --cnn_steps 500 \
    --cnn_modes fp32
fi
if has torch; then
  # torch.compile once, then brisk and PyTorch eager in alternating rounds (the CNN step is bound
  # by the host, whose speed drifts): gpu-results.py takes each one's median.
  PYTHONUNBUFFERED=1 stage torch 40 python3 bench/gpu/torch_cnn.py --json "$out/torch_cnn.jsonl"
  for round in 1 2 3; do
    stage "cnn_round$round" 40 "$build/bench/gpu/bench_gpu" --only cnn --json /tmp/cnn_round.jsonl &&
      cat /tmp/cnn_round.jsonl >> "$out/bench_gpu.jsonl"
    PYTHONUNBUFFERED=1 stage "torch_round$round" 30 python3 bench/gpu/torch_cnn.py --no-compile \
      --json /tmp/torch_round.jsonl && cat /tmp/torch_round.jsonl >> "$out/torch_cnn.jsonl"
  done
fi
if has memcheck; then
  if command -v compute-sanitizer > /dev/null; then
    stage memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 --leak-check no \
      "$build/tests/test_cuda" --gtest_filter='CudaOps.EveryOpMatchesTheCpu'
    # The row kernels' shared-memory path (GPUs before Hopper) on this GPU, under the sanitizer too.
    BRISK_CUDA_ROW_CLUSTERS=0 stage memcheck_no_clusters 50 compute-sanitizer --tool memcheck --error-exitcode 9 \
      --leak-check no "$build/tests/test_cuda" --gtest_filter='CudaOps.EveryOpMatchesTheCpu'
  else
    echo "=== memcheck: compute-sanitizer is not on this machine"
    put stage_memcheck '"no compute-sanitizer"'
  fi
fi

if has train; then
  for mp in no bf16; do
    rm -rf "/tmp/fm_$mp"
    stage "train_$mp" 20 "$build/examples/fashion_mnist" --epochs "$epochs" --mixed_precision "$mp" \
      --out "/tmp/fm_$mp" --workers 2
    if [[ -s /tmp/fm_$mp/metrics.jsonl ]]; then put "train_${mp}_last_epoch" "$(tail -1 "/tmp/fm_$mp/metrics.jsonl")"; fi
  done
fi
if has trainsh; then
  stage trainsh 5 bash scripts/train.sh --epochs 1 --out /tmp/fm_trainsh
fi
if has aln; then
  # Built apart from the main targets: without a Google Benchmark that runs here it does not exist.
  stage aln_build 60 cmake --build "$build" --target bench_add_layer_norm &&
    stage aln 60 "$build/bench/bench_add_layer_norm" --benchmark_filter='gpu:1' --benchmark_repetitions=3 \
      --benchmark_out="$out/add_layer_norm.json" --benchmark_out_format=json
fi
if has gpt2; then
  stage hf_bpe 60 python3 scripts/hf_bpe_fixtures.py --out "$out/bpe_hf"
  for mp in no bf16; do
    rm -rf "/tmp/gpt2_ref_$mp"
    stage "gpt2_ref_$mp" 30 "$build/bench/gpt2/gpt2_reference" --out "/tmp/gpt2_ref_$mp" --preset 124M --batch 4 \
      --seq 64 --steps 10 --device cuda --mixed_precision "$mp" &&
      stage "gpt2_check_$mp" 30 python3 bench/gpt2/torch_gpt2.py check "/tmp/gpt2_ref_$mp" --json "$out/gpt2_check.jsonl"
  done
  for ((round = 1; round <= ${BRISK_GPT2_ROUNDS:-2}; round++)); do
    stage "gpt2_brisk_round$round" 30 bash bench/gpt2/brisk_bench.sh "$build" "$out/gpt2_bench.jsonl"
    stage "gpt2_torch_round$round" 30 python3 bench/gpt2/torch_gpt2.py bench --json "$out/gpt2_bench.jsonl"
    BRISK_GPT2_CUDA_GRAPH=1 stage "gpt2_brisk_graph_round$round" 30 bash bench/gpt2/brisk_bench.sh "$build" \
      "$out/gpt2_bench.jsonl"
  done
fi
if has dgelu; then
  for ((round = 1; round <= ${BRISK_GPT2_ROUNDS:-2}; round++)); do
    for mode in dgelu bgrad off; do
      BRISK_CUDA_DGELU_EPILOGUE=$mode stage "gpt2_dgelu_${mode}_round$round" 30 bash bench/gpt2/brisk_bench.sh "$build" \
        "$out/gpt2_dgelu.jsonl"
    done
    stage "gpt2_dgelu_torch_round$round" 30 python3 bench/gpt2/torch_gpt2.py bench --json "$out/gpt2_dgelu.jsonl"
  done
fi
big_batch=""
if has gpt2_350m; then
  for b in ${BRISK_GPT2_350M_BATCHES:-48 32 16}; do
    if BRISK_GPT2_PRESET=350M BRISK_GPT2_BATCH=$b stage "gpt2_350m_brisk_b$b" 30 bash bench/gpt2/brisk_bench.sh \
      "$build" "$out/gpt2_350m.jsonl" 10 &&
      stage "gpt2_350m_torch_b$b" 30 python3 bench/gpt2/torch_gpt2.py bench --preset 350M --batch "$b" --steps 10 \
        --json "$out/gpt2_350m.jsonl"; then
      big_batch=$b
      put gpt2_350m_batch "$b"
      break
    fi
  done
fi
if has zero; then
  for s in none zero1 zero2 zero3; do
    BRISK_SHARDING=$s stage "zero_$s" 10 bash bench/gpt2/brisk_bench.sh "$build" "$out/zero_gpu.jsonl" 10
  done
fi
if has profile; then
  mkdir -p "$out/profile"
  stage profile 30 bash -c 'bash bench/gpt2/kernel_profile.sh "$1" "$2" 1 > "$2/table.txt" 2>&1' _ "$build" \
    "$out/profile"
  tail -40 "$out/profile/table.txt" 2> /dev/null || true
fi
if has compile; then
  if has gpt2 || [[ -z $big_batch ]]; then
    stage gpt2_torch_compile 0 python3 bench/gpt2/torch_gpt2.py bench --compile --json "$out/gpt2_bench.jsonl"
  fi
  if [[ -n $big_batch ]]; then
    stage gpt2_350m_torch_compile 0 python3 bench/gpt2/torch_gpt2.py bench --compile --preset 350M --batch "$big_batch" \
      --steps 10 --json "$out/gpt2_350m.jsonl"
  fi
fi
echo "  \"done\": true" >> "$summary"
echo "}" >> "$summary"
echo "=== gpu-check finished in $((SECONDS - start))s"
