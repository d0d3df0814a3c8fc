#!/usr/bin/env bash
# `gpt2 sample --pretrained` on tests/data/fixtures/hf/gpt2_bpe (a Hugging Face GPT-2 folder with its
# own vocab.json + merges.txt): the greedy continuation of the prompt must be, byte for byte, the
# one the PyTorch reference computed (tests/examples/make_gpt2_bpe_fixture.py wrote both).
#
#   run_gpt2_pretrained_sample.sh GPT2 FIXTURES_HF OUT_FILE
set -u
gpt2=$1; hf=$2; out=$3
golden=$hf/goldens/gpt2_bpe_sample.txt
"$gpt2" sample --pretrained "$hf/gpt2_bpe" --prompt "The quick brown fox" --max_new_tokens 24 --temperature 0 \
  --threads 1 >"$out" || { echo "FAIL: gpt2 sample exited $?"; exit 1; }
if ! cmp "$golden" "$out"; then
  echo "expected:"; cat "$golden"; echo "got:"; cat "$out"
  echo "FAIL: the greedy continuation differs from the reference's"; exit 1
fi
echo "GPT2-PRETRAINED-SAMPLE-OK: $(cat "$out")"
