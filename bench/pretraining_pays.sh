#!/usr/bin/env bash
# Does masked-language-model pretraining pay on the fortunes task (docs/pretrained.md)? Pretrains a
# small BERT with `text_classification pretrain` and saves it; then fine-tunes two classifiers of
# the same shape with the same tokenizer, steps, learning rate and seed: one from the pretrained
# folder (--model_name_or_path), one from random weights (--config_name + --tokenizer_name of the
# same folder). Prints each run's final test accuracy beside the majority-class baseline.
#   bench/pretraining_pays.sh BUILD_DIR [WORK_DIR=out/pretraining_pays] [PRETRAIN_EPOCHS=3] [FINETUNE_EPOCHS=3]
# One thread per run (THREADS=n to change); the logs stay in WORK_DIR.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
help_if_asked "$@"
build=${1:?usage: pretraining_pays.sh BUILD_DIR [WORK_DIR] [PRETRAIN_EPOCHS] [FINETUNE_EPOCHS]}
work=${2:-out/pretraining_pays}
pretrain_epochs=${3:-3}
finetune_epochs=${4:-3}
tc=$build/examples/text_classification
require_built "$tc" "cmake --build $build --target text_classification"
mkdir -p "$work"
machine_line
shape=(--preset mini --config_overrides hidden_size=128,num_hidden_layers=2,num_attention_heads=4,intermediate_size=512)
common=(--threads "${THREADS:-1}" --disable_tqdm --max_seq_length 64)

run() {  # run NAME ARGS...: prints the command, keeps the output in WORK_DIR/NAME.log
  local name=$1; shift
  echo "\$ text_classification $*"
  local start=$SECONDS
  "$tc" "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; echo "$name failed" >&2; exit 1; }
  echo "  $name: $((SECONDS - start)) s; $(grep -E '^(final|step [0-9]+ \(epoch [0-9.]+\): eval)' "$work/$name.log" | tail -1)"
}

run pretrain pretrain "${shape[@]}" --vocab_size 4096 --num_train_epochs "$pretrain_epochs" --logging_steps 100 \
  --output_dir "$work/mlm" "${common[@]}"
run from_pretrained --model_name_or_path "$work/mlm" --num_train_epochs "$finetune_epochs" \
  --output_dir "$work/from_pretrained" "${common[@]}"
run from_scratch --config_name "$work/mlm" --tokenizer_name "$work/mlm" --num_train_epochs "$finetune_epochs" \
  --output_dir "$work/from_scratch" "${common[@]}"
