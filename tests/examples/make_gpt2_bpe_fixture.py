#!/usr/bin/env python3
"""Makes tests/data/fixtures/hf/gpt2_bpe, a Hugging Face GPT-2 folder with its own tokenizer files, and
the golden output of `gpt2 sample --pretrained` on it (examples/CMakeLists.txt's
examples.gpt2_pretrained_sample).

The folder: a tiny random GPT2LMHeadModel (tests/models/reference/hf_reference.py's PyTorch
reference, its weights written under transformers' "transformer." names) whose vocabulary is the
byte-level BPE of tests/data/fixtures/bpe (vocab.json + merges.txt, copied: 557 tokens, the 256 bytes,
300 merges and <|endoftext|>, which GPT-2's byte-level BPE needs at the least; the gpt2/ fixture's 51
tokens cannot hold the byte alphabet). The golden: the prompt encoded by scripts/bpe_reference.py's
encoder.py algorithm, continued greedily (the most likely token each step) by the reference model,
decoded to bytes; written as the exact bytes `gpt2 sample` prints (the text and a newline). The
script checks that every greedy choice wins by a margin far above float32 rounding, so an
independent implementation reproduces it exactly.

    /usr/bin/python3 tests/examples/make_gpt2_bpe_fixture.py   # (Debian's python3-torch)
"""
import json
import os
import re
import shutil
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "models", "reference"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bpe_reference  # noqa: E402
import hf_reference  # noqa: E402

PROMPT = "The quick brown fox"
NEW_TOKENS = 24
MIN_MARGIN = 1e-3  # the best logit's lead over the second, at every step


def encode_prompt(enc):
    # GPT-2's pre-tokenisation regex restricted to ASCII (the same splits for an ASCII prompt), so the
    # `regex` module (absent beside Debian's python3-torch) is not needed.
    assert PROMPT.isascii()
    bpe_reference._PAT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")
    return enc.encode(PROMPT.encode())


def greedy(model, ids, n):
    """The prompt and n greedy tokens, or None when some step's choice is a near tie."""
    out = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([out]))[0, -1]
            top = torch.topk(logits, 2).values
            if top[0] - top[1] <= MIN_MARGIN:
                return None
            out.append(int(torch.argmax(logits)))
    return out


def main():
    src = os.path.join(ROOT, "tests", "data", "fixtures", "bpe")
    out = os.path.join(ROOT, "tests", "data", "fixtures", "hf", "gpt2_bpe")
    vocab, merges = bpe_reference.load_files(src)
    eot = vocab[bpe_reference.EOT]
    cfg = dict(hf_reference.GPT2_CONFIG, vocab_size=len(vocab), n_positions=64, n_ctx=64, bos_token_id=eot,
               eos_token_id=eot)
    enc = bpe_reference.Encoder(vocab, merges)
    # The first seed from 2024 on whose greedy continuation has no near tie and prints as plain
    # ASCII (random weights, so any output is as good; this one reads well in a test log).
    for seed in range(2024, 2124):
        ref = hf_reference.GPT2LMHeadModel(cfg)
        hf_reference.randomise(ref, torch.Generator().manual_seed(seed))
        hf_reference.write_folder(out, cfg, hf_reference.state(ref))
        # What transformers would load: the folder read back by name.
        ref = hf_reference.GPT2LMHeadModel(cfg)
        hf_reference.load_by_name(ref, out, "transformer.")
        ids = greedy(ref, encode_prompt(enc), NEW_TOKENS)
        if ids and all(0x20 <= b < 0x7f for b in enc.decode(ids)):
            break
    else:
        raise SystemExit("no seed in [2024, 2124) gives a clean greedy continuation")
    for f in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
    golden = os.path.join(ROOT, "tests", "data", "fixtures", "hf", "goldens", "gpt2_bpe_sample.txt")
    with open(golden, "wb") as f:
        f.write(enc.decode(ids) + b"\n")
    print("seed", seed, "prompt", PROMPT, "->", ids, json.dumps(enc.decode(ids).decode()))


if __name__ == "__main__":
    main()
