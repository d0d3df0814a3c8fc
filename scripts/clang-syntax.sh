#!/usr/bin/env bash
# Every host C++ file must compile with clang 14 as well as g++ 12 (-Wall -Wextra -Werror). The
# sanitizer build (scripts/sanitize.sh) compiles the libraries, tests and fuzz targets with clang;
# this checks the rest (bench/, bench/gpu/, bench/gpt2/, examples/ and the CUDA build's host files kernels/cuda/*.cpp)
# with clang -fsyntax-only, using the flags of a clang configuration of the whole project
# (CUDA included when a toolkit is found; .cu files stay with nvcc and are not checked here).
# Usage: scripts/clang-syntax.sh [FILE-REGEX]   (default: bench/|bench/gpu/|bench/gpt2/|examples/|kernels/cuda/)
# Env: BRISK_CLANG_SYNTAX_DIR (default build-clang-syntax).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${BRISK_CLANG_SYNTAX_DIR:-build-clang-syntax}
pattern=${1:-/(bench|bench/gpu|bench/gpt2|examples|kernels/cuda)/[^/]*\.cpp$}
cuda_args=()
if [[ -n ${BRISK_CUDA_ARCHITECTURES:-} ]]; then cuda_args+=("-DCMAKE_CUDA_ARCHITECTURES=$BRISK_CUDA_ARCHITECTURES"); fi
if ! command -v nvcc > /dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
mkdir -p "$dir"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CUDA_HOST_COMPILER=g++ \
  -DBRISK_BUILD_TESTS=ON -DBRISK_BUILD_BENCH=ON -DBRISK_BUILD_EXAMPLES=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DBRISK_UNITY_LIBS=OFF -DBRISK_UNITY_TESTS=OFF \
  "${cuda_args[@]}" > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
PYTHONPATH=scripts python3 - "$dir/compile_commands.json" "$pattern" << 'PY'
import subprocess, sys
import compile_commands
entries = compile_commands.entries(sys.argv[1], sys.argv[2])
failed = []
for e in entries:
    out = compile_commands.command(e)
    r = subprocess.run(out[:1] + ["-fsyntax-only"] + out[1:], cwd=e["directory"], capture_output=True, text=True)
    print(("ok     " if r.returncode == 0 else "FAILED ") + e["file"], flush=True)
    if r.returncode:
        print(r.stderr, flush=True)
        failed.append(e["file"])
print(f"clang-syntax: {len(entries) - len(failed)} of {len(entries)} files compile with clang")
sys.exit(1 if failed or not entries else 0)
PY
