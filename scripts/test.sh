#!/usr/bin/env bash
# Builds brisk (scripts/setup.sh) and runs the whole test suite; exits non-zero on any failure.
# Usage: scripts/test.sh [extra ctest arguments, e.g. -L unit or -R Half]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
# One test more than there are cores: the multi-process tests (two lanes, CMakeLists.txt) spend
# most of their time waiting, and the single-process tests fill the cores meanwhile.
jobs=$(($(nproc 2> /dev/null || echo 2) + 1))
ctest --test-dir "${BRISK_BUILD_DIR:-build}" --output-on-failure -j "$jobs" --timeout 900 "$@"
