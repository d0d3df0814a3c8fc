#!/usr/bin/env bash
# The portable build (BRISK_NATIVE=OFF: baseline x86-64 code with AVX2 and AVX-512 copies of the
# hot CPU kernels, chosen at run time) must compile with clang 14 as well as g++: CI's other clang
# stages (fuzz, sanitizers, clang syntax) configure native builds. This compiles, with clang and
# the portable configuration's flags (-Wall -Wextra -Werror), exactly the files whose code depends
# on the instruction set: every file compiled more than once (the hot kernels of kernels/cpu/ in
# their baseline, AVX2 and AVX-512 copies) and every file that names an instruction set itself
# (__AVX2__ and the like, intrinsics, target attributes, CPUID, BRISK_CPU_DISPATCH / BRISK_CPU_ISA:
# blas.cpp, gemm_bf16.cpp, the run-time choice in kernels/src/cpu_isa.cpp, and the few files that
# test or print it). The rest of the tree is the same code as in a native build, which the clang
# stages compile. Object code (at -O1), not -fsyntax-only: a target-feature mismatch (an AVX
# intrinsic inlined into baseline code) is an error only when clang generates code.
# Usage: scripts/clang-portable.sh [FILE-REGEX]   (a regex: compile the matching files instead)
# Env: BRISK_CLANG_PORTABLE_DIR (default build-clang-portable), BRISK_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=${BRISK_CLANG_PORTABLE_DIR:-build-clang-portable}
pattern=${1:-}
mkdir -p "$dir"
# File by file (no unity batches): which files depend on the instruction set is read from each one.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 -DBRISK_NATIVE=OFF -DBRISK_CUDA=OFF \
  -DBRISK_BUILD_TESTS=ON -DBRISK_BUILD_BENCH=ON -DBRISK_BUILD_EXAMPLES=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DBRISK_UNITY_LIBS=OFF -DBRISK_UNITY_TESTS=OFF \
  > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
grep -q "BRISK_CPU_DISPATCH:BOOL=ON" "$dir/CMakeCache.txt" || { echo "clang-portable: the configuration has no ISA dispatch"; exit 1; }
PYTHONPATH=scripts python3 - "$dir/compile_commands.json" "$pattern" "${BRISK_JOBS:-2}" << 'PY'
import collections, concurrent.futures, re, subprocess, sys, time
import compile_commands
all_entries = compile_commands.entries(sys.argv[1])
# What marks a file's code as depending on the instruction set (see the header).
ISA = re.compile(r"__AVX|__F16C__|__FMA__|__BMI|immintrin\.h|cpuid\.h|__builtin_cpu_supports|"
                 r"__attribute__\(\(target\(|BRISK_CPU_DISPATCH|BRISK_CPU_ISA\b")
copies = collections.Counter(e["file"] for e in all_entries)
def isa_dependent(file):
    with open(file, errors="replace") as f:
        return copies[file] > 1 or ISA.search(f.read()) is not None
if sys.argv[2]:
    entries = [e for e in all_entries if re.search(sys.argv[2], e["file"])]
else:
    entries = [e for e in all_entries if isa_dependent(e["file"])]
def compile(e):
    out = compile_commands.command(e)
    # -O1 instead of the build's -O3 (4.3 instead of 6.9 CPU minutes for the 27 compilations):
    # clang's diagnostics come from its front end and code generation (a target-feature mismatch),
    # not from the optimisation level, and the optimiser's own (-Wpass-failed) is off for the
    # kernels (kernels/CMakeLists.txt).
    out = [("-O1" if re.fullmatch(r"-O[0-3s]", a) else a) for a in out]
    march = next((a for a in out if a.startswith("-march=")), "-march=(default)")
    start = time.monotonic()
    r = subprocess.run(out + ["-o", "/dev/null"], cwd=e["directory"], capture_output=True, text=True)
    return e["file"], f"{march} {time.monotonic() - start:.1f} s", r
failed = []
with concurrent.futures.ThreadPoolExecutor(int(sys.argv[3])) as pool:
    for file, march, r in pool.map(compile, entries):
        print(("ok     " if r.returncode == 0 else "FAILED ") + file + " " + march, flush=True)
        if r.returncode:
            print(r.stderr, flush=True)
            failed.append(file)
print(f"clang-portable: {len(entries) - len(failed)} of {len(entries)} portable compilations pass with clang")
sys.exit(1 if failed or not entries else 0)
PY
