#!/usr/bin/env bash
# Builds brisk (scripts/setup.sh) and runs the whole test suite; exits non-zero on any failure.
# Usage: scripts/test.sh [extra ctest arguments, e.g. -L unit or -R Half]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
ctest --test-dir "${BRISK_BUILD_DIR:-build}" --output-on-failure -j2 --timeout 900 "$@"
