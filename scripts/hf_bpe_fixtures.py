#!/usr/bin/env python3
"""Golden encodings made by Hugging Face `tokenizers` alone, for tests/data/test_bpe.cpp: trains a
small byte-level BPE (GPT-2's pre-tokenisation and byte-to-unicode mapping) on the built-in
corpus of scripts/bpe_reference.py, saves it in GPT-2's formats (vocab.json, merges.txt) and
encodes that script's test strings with it (valid UTF-8 only: tokenizers takes str), so that
brisk's tokenizer is checked against a vocabulary, merge order and encodings it had no part in.

    python3 scripts/hf_bpe_fixtures.py [--out tests/data/fixtures/bpe_hf] [--vocab-size 600]

Needs the `tokenizers` package (the GPU machines have it; scripts/gpu-check.sh's gpt2 stage runs
this and the files come back with its output, to be committed).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_reference  # noqa: E402  (TEST_STRINGS, corpus_text, EOT; no `regex` needed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "fixtures",
                                                  "bpe_hf"))
    ap.add_argument("--vocab-size", type=int, default=600)
    args = ap.parse_args()
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, special_tokens=[bpe_reference.EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([bpe_reference.corpus_text()], trainer)
    os.makedirs(args.out, exist_ok=True)
    tok.model.save(args.out)  # vocab.json and merges.txt, GPT-2's formats
    with open(os.path.join(args.out, "merges.txt"), encoding="utf-8") as f:
        merges = sum(1 for line in f if line.strip() and not line.startswith("#version"))
    strings = []
    for name, data in bpe_reference.TEST_STRINGS:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        ids = tok.encode(text).ids
        if tok.decode(ids, skip_special_tokens=False) != text:
            print(f"hf_bpe_fixtures: tokenizers does not decode {name} back to its text", file=sys.stderr)
        strings.append({"name": name, "hex": data.hex(), "ids": ids})
    with open(os.path.join(args.out, "goldens.json"), "w") as f:
        json.dump({"generator": f"Hugging Face tokenizers {tokenizers.__version__} (trained and encoded by it)",
                   "vocab_size": tok.get_vocab_size(), "merges": merges, "strings": strings}, f, indent=1)
    print(f"hf_bpe_fixtures: tokenizers {tokenizers.__version__}: {tok.get_vocab_size()} tokens, {merges} merges, "
          f"{len(strings)} golden strings -> {os.path.normpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
