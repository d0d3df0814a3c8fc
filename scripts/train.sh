#!/usr/bin/env bash
# The main job: builds brisk (scripts/setup.sh), then trains the example CNN on Fashion-MNIST
# (Debian's dataset-fashion-mnist, installed by setup.sh) data-parallel on 2 CPU processes:
#   build/bin/brisk launch -n 2 build/examples/fashion_mnist [flags]
# and saves out/fashion_mnist/{model.safetensors,metrics.jsonl,checkpoints/}.
# Usage: scripts/train.sh [fashion_mnist flags, e.g. --epochs 2 --mixed_precision bf16]  (see --help)
# Env: BRISK_BUILD_DIR (build), BRISK_TRAIN_PROCESSES (2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
build=${BRISK_BUILD_DIR:-build}
for arg in "$@"; do
  # --help is printed once, by the program itself.
  if [[ $arg == --help || $arg == -h ]]; then exec "$build/examples/fashion_mnist" --help; fi
done
exec "$build/bin/brisk" launch -n "${BRISK_TRAIN_PROCESSES:-2}" "$build/examples/fashion_mnist" "$@"
