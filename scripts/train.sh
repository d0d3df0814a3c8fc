#!/usr/bin/env bash
# The main job: builds brisk, then trains the example CNN on Fashion-MNIST with `brisk launch`:
# data-parallel on 2 CPU processes, or one process per GPU where there are GPUs (the example
# trains where its Accelerator puts it: on the GPU of each process), and saves
# out/fashion_mnist/{model.safetensors,metrics.jsonl,checkpoints/}.
#   build/bin/brisk launch [-n N] build/examples/fashion_mnist [flags]
# Building: a build folder that scripts/gpu-build.sh made (a GPU machine without apt or network)
# is only brought up to date; otherwise scripts/setup.sh installs the apt packages that are
# missing (none when all are there) and builds.
# Usage: scripts/train.sh [fashion_mnist flags, e.g. --epochs 2 --mixed_precision bf16]  (see --help)
# Env: BRISK_BUILD_DIR (build), BRISK_TRAIN_PROCESSES (default: brisk launch's: the config's, else
#      one per GPU, else 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=${BRISK_BUILD_DIR:-build}
if [[ -f $build/gpu-env.sh ]]; then
  cmake --build "$build" -j "${BRISK_JOBS:-$(nproc 2> /dev/null || echo 2)}" --target fashion_mnist brisk_cli
  # shellcheck source=/dev/null
  source "$build/gpu-env.sh"
else
  bash scripts/setup.sh
fi
for arg in "$@"; do
  # --help is printed once, by the program itself.
  if [[ $arg == --help || $arg == -h ]]; then exec "$build/examples/fashion_mnist" --help; fi
done
processes=()
if [[ -n ${BRISK_TRAIN_PROCESSES:-} ]]; then processes=(-n "$BRISK_TRAIN_PROCESSES"); fi
exec "$build/bin/brisk" launch "${processes[@]}" "$build/examples/fashion_mnist" "$@"
