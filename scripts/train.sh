#!/usr/bin/env bash
# The main job: builds brisk (scripts/setup.sh), then trains the example CNN on Fashion-MNIST
# (Debian's dataset-fashion-mnist, installed by setup.sh) and saves out/fashion_mnist/model.safetensors.
# Usage: scripts/train.sh [fashion_mnist flags, e.g. --epochs 2 --threads 1]  (see --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
exec "${BRISK_BUILD_DIR:-build}/examples/fashion_mnist" "$@"
