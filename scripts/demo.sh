#!/usr/bin/env bash
# Builds brisk (scripts/setup.sh) and runs the demo: a small MLP trained with hand-written SGD.
# Usage: scripts/demo.sh [demo flags, e.g. --epochs 50 --lr 0.2]  (see --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
exec "${BRISK_BUILD_DIR:-build}/examples/mlp_demo" "$@"
