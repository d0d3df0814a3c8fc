#!/usr/bin/env bash
# The unit and multi-process tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang 14,
# CPU only). They share one build folder with the libFuzzer targets (scripts/fuzz.sh): the
# libraries are compiled once, instrumented for both, so CI compiles brisk with clang only once.
# Any sanitizer report fails the test that caused it (UBSan does not recover; LeakSanitizer runs
# at every exit, with OpenMPI's own allocations suppressed: tests/sanitizers/lsan.supp).
#
# Usage: scripts/sanitize.sh [extra ctest arguments]     build, then run the tests
# Env: BRISK_FUZZ_BUILD_DIR (default build-fuzz), BRISK_JOBS.
# The tests run: labels unit and multiprocess, minus slow ones (the install check, the CUDA
# recording tests, benchmarks and examples are not built here), and minus the fault matrix's
# zero1/zero2 cases and the restart matrix (accelerate.restart.*): those compare whole jobs'
# behaviour (which the unsanitized suite checks) and would add minutes of sanitized start-ups to
# CI's budget; the fault matrix's overlap, shm and zero3 cases keep the failure paths' memory
# checked (the overlap path's skipped collective is where ASan caught OpenMPI's overwrite).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build_dir=${BRISK_FUZZ_BUILD_DIR:-build-fuzz}

bash scripts/fuzz.sh configure
# Everything that build has: libraries, tests and their helper programs, fuzz targets.
cmake --build "$build_dir" -j "${BRISK_JOBS:-$(nproc)}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:strict_init_order=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0}
# OpenMPI's components stay mapped at exit so their leaks are attributed and suppressed
# (tests/sanitizers/no_dlclose.c says why); preloaded into ctest's children only.
cc -shared -fPIC -O2 -o "$build_dir/libbrisk_no_dlclose.so" tests/sanitizers/no_dlclose.c
# mpirun forwards these to every rank (they are in its environment).
LD_PRELOAD=$root/$build_dir/libbrisk_no_dlclose.so ctest --test-dir "$build_dir" --output-on-failure -j "${BRISK_JOBS:-$(nproc)}" --timeout 900 \
  -L 'unit|multiprocess' -LE 'slow|example|cuda' -E '^accelerate[.](restart[.]|faults[.]zero[12][.])' "$@"
