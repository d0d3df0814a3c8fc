#!/usr/bin/env bash
# The workflow of docs/pretrained.md in seconds: examples/text_classification pretrains a tiny BERT
# as a masked language model for a few steps and saves it with save_pretrained; fine-tunes a
# classifier from that folder (the pooler and classifier new, the MLM head left behind), evaluates it
# and saves it (config.json with the fortune files as id2label, weights, tokenizer files); then loads
# the saved folder back and evaluates it without training: the accuracy and the loss must be the
# final evaluation's, digit for digit, and the classifier must come from the folder.
#
#   run_text_classification_chain.sh TEXT_CLASSIFICATION WORK_DIR
set -u
tc=$1; work=$2
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run NAME ARGS...: the program's output in WORK_DIR/NAME.log, shown when it fails
  local name=$1; shift
  OMP_NUM_THREADS=1 "$tc" "$@" >"$work/$name.log" 2>&1
  local status=$?
  [[ $status -eq 0 ]] || { cat "$work/$name.log"; fail "$name exited $status"; }
}
expect() {  # expect NAME REGEX WHAT
  grep -Eq "$2" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: $3"; }
}

# Without Debian's fortunes (a GPU machine set up by scripts/gpu-deps.sh): four small files of
# made-up quotes in the fortune format, each file with words of its own.
data=()
if [[ ! -f /usr/share/games/fortunes/computers ]]; then
  mkdir -p "$work/fortunes"
  for f in computers cookie definitions people; do
    awk -v f="$f" 'BEGIN { for (i = 0; i < 150; ++i) printf "%s quote %d says %s things about %s number %d.\n%%\n", f, i, f, f, i % 13 }' \
      >"$work/fortunes/$f"
  done
  data=(--data "$work/fortunes")
fi
common=(--threads 1 --disable_tqdm --max_seq_length 32 --per_device_eval_batch_size 128 "${data[@]}")

# 1. Pretraining.
run pretrain pretrain --preset tiny --vocab_size 400 --max_steps 6 --per_device_train_batch_size 8 --logging_steps 3 \
  --output_dir "$work/mlm" "${common[@]}"
expect pretrain "bert-wordpiece\([0-9]+, uncased\) learned from [0-9]+ training texts" "no vocabulary learned from the text"
# At most --vocab_size tokens (fewer when the text has fewer frequent pairs), all in vocab.txt.
vocab=$(sed -nE 's/.*bert-wordpiece\(([0-9]+), uncased\) learned.*/\1/p' "$work/pretrain.log")
expect pretrain "step 3: loss [0-9.]+" "no training loss logged"
expect pretrain "step 6 \(epoch [0-9.]+\): eval loss [0-9.]+, perplexity [0-9.]+" "no validation loss after the last step"
for f in config.json model.safetensors vocab.txt tokenizer.json tokenizer_config.json; do
  [[ -s $work/mlm/$f ]] || fail "pretraining saved no $f"
done
grep -q '"BertForMaskedLM"' "$work/mlm/config.json" || fail "the pretrained config.json is not a BertForMaskedLM's"
[[ $vocab -le 400 && $(wc -l <"$work/mlm/vocab.txt") -eq $vocab ]] ||
  fail "vocab.txt has $(wc -l <"$work/mlm/vocab.txt") tokens, the tokenizer $vocab (at most 400)"

# 2. Fine-tuning from the pretrained folder.
run finetune --model_name_or_path "$work/mlm" --max_steps 8 --per_device_train_batch_size 8 --eval_strategy steps \
  --eval_steps 4 --output_dir "$work/cls" "${common[@]}"
expect finetune "4 fortune files \(computers,cookie,definitions,people\), [0-9]+ training and [0-9]+ test texts" "no task summary"
expect finetune "tokenizer: bert-wordpiece\($vocab, uncased\) from $work/mlm" "the tokenizer is not the pretrained folder's"
expect finetune "initialized classifier.weight: a new classification head" "the classifier head is not reported as new"
expect finetune "ignored cls.predictions.transform.dense.weight" "the MLM head is not reported as ignored"
expect finetune "epoch 0.[0-9]+/1: eval loss [0-9.]+, eval accuracy [0-9.]+, majority baseline [0-9.]+ \([0-9]+ texts\)" \
  "no evaluation with the baseline during training"
expect finetune "final: eval loss [0-9.]+, eval accuracy [0-9.]+, majority baseline 0\.[0-9]+" "no final evaluation"
for f in config.json model.safetensors vocab.txt tokenizer.json eval_results.json; do
  [[ -s $work/cls/$f ]] || fail "fine-tuning saved no $f"
done
grep -q '"BertForSequenceClassification"' "$work/cls/config.json" || fail "config.json is not a classifier's"
tr -d ' \n' <"$work/cls/config.json" | grep -q '"id2label":{"0":"computers","1":"cookie","2":"definitions","3":"people"}' ||
  fail "config.json's id2label is not the four fortune files"

# 3. The saved classifier loaded back: every tensor from the folder, the same evaluation.
run reload --model_name_or_path "$work/cls" --do_train=false --output_dir "$work/reload" "${common[@]}"
grep -q "initialized" "$work/reload.log" && { cat "$work/reload.log"; fail "loading the saved classifier initialised tensors"; }
metric() { tr -d ' \n' <"$1" | sed -nE "s/.*\"$2\":([-0-9.eE+]+).*/\1/p"; }
for m in eval_accuracy eval_loss majority_baseline; do
  a=$(metric "$work/cls/eval_results.json" $m); b=$(metric "$work/reload/eval_results.json" $m)
  [[ -n $a && $a == "$b" ]] || fail "$m after training ($a) differs from the reloaded model's ($b)"
done
echo "TEXT-CLASSIFICATION-CHAIN-OK: pretrain -> save_pretrained -> fine-tune -> evaluate -> save_pretrained -> reload:" \
  "accuracy $(metric "$work/cls/eval_results.json" eval_accuracy) both times"
