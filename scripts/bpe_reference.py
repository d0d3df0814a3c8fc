#!/usr/bin/env python3
"""An independent GPT-2 byte-level BPE, for the golden encodings that tests/data/test_bpe.cpp checks
brisk's data::GPT2Tokenizer against.

- The encoder is OpenAI's encoder.py algorithm (gpt-2/src/encoder.py): the pre-tokenisation regex
  run with the `regex` module, bytes_to_unicode, and bpe() merging the lowest-ranked pair first.
  `<|endoftext|>` in the text is the special token (tiktoken's allowed_special="all"): the text
  is split at it first and each piece is pre-tokenised on its own.
- Text that is not valid UTF-8 is decoded with errors="surrogateescape": every byte of an invalid
  sequence becomes one lone surrogate, which the regex classes as neither letter, number nor
  space; encoding a pre-token with "surrogateescape" gives its original bytes back.
- A tiny byte-level BPE trainer (count adjacent pairs over the pre-tokenised corpus, merge the
  most frequent, ties to the smallest pair) makes a small vocabulary from a built-in corpus.

    python3 scripts/bpe_reference.py [--out tests/data/fixtures/bpe] [--merges 300] [--with-hf]

writes vocab.json, merges.txt (GPT-2's formats) and goldens.json (each test string as hex bytes
with its token ids). --with-hf also encodes every valid-UTF-8 test string with Hugging Face
`tokenizers` (a ByteLevel BPE over the same files), checks that it agrees, and writes
goldens_hf.json; HF cannot take invalid UTF-8, so those strings are left out there.
"""
import argparse
import collections
import json
import os
import sys

_PAT = None


def pat():
    """GPT-2's pre-tokenisation regex (the `regex` module is imported only when it is needed, so
    scripts/hf_bpe_fixtures.py can read TEST_STRINGS and corpus_text() without it)."""
    global _PAT
    if _PAT is None:
        import regex
        _PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    return _PAT
EOT = "<|endoftext|>"


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


BYTE_ENCODER = bytes_to_unicode()
BYTE_DECODER = {v: k for k, v in BYTE_ENCODER.items()}


def get_pairs(word):
    return set(zip(word, word[1:]))


def pieces(text):
    """The pre-tokens of a str (surrogate-escaped bytes allowed), each as its UTF-8 bytes."""
    return [t.encode("utf-8", "surrogateescape") for t in pat().findall(text)]


class Encoder:
    """encoder.py's Encoder, with the special token split first."""

    def __init__(self, encoder, bpe_merges):
        self.encoder = encoder
        self.decoder = {v: k for k, v in encoder.items()}
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        if not pairs:
            return token
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        self.cache[token] = word
        return word

    def encode_ordinary(self, text):
        bpe_tokens = []
        for b in pieces(text):
            token = "".join(BYTE_ENCODER[x] for x in b)
            bpe_tokens.extend(self.encoder[t] for t in self.bpe(token).split(" "))
        return bpe_tokens

    def encode(self, data: bytes):
        text = data.decode("utf-8", "surrogateescape")
        out = []
        parts = text.split(EOT)
        for i, part in enumerate(parts):
            if i:
                out.append(self.encoder[EOT])
            out.extend(self.encode_ordinary(part))
        return out

    def decode(self, tokens):
        text = "".join(self.decoder[t] for t in tokens)
        return bytes(BYTE_DECODER[c] for c in text)


def train(corpus: str, num_merges: int):
    """Byte-level BPE training: returns (vocab dict token -> id, merges list of pairs)."""
    words = collections.Counter()
    for b in pieces(corpus):
        words[tuple(BYTE_ENCODER[x] for x in b)] += 1
    vocab = {}
    for ch in BYTE_ENCODER.values():  # the 256 byte tokens first, in bytes_to_unicode's order (as GPT-2)
        vocab[ch] = len(vocab)
    merges = []
    words = dict(words)
    for _ in range(num_merges):
        counts = collections.Counter()
        for w, c in words.items():
            for p in zip(w, w[1:]):
                counts[p] += c
        if not counts:
            break
        top = max(counts.values())
        best = min(p for p, c in counts.items() if c == top)  # ties: the smallest pair
        merges.append(best)
        merged = best[0] + best[1]
        vocab[merged] = len(vocab)
        new_words = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i < len(w) - 1 and w[i] == best[0] and w[i + 1] == best[1]:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + c
        words = new_words
    vocab[EOT] = len(vocab)
    return vocab, merges


CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog doesn't care; it's sleeping, and it'll sleep
until the sun sets. We've seen this before: they're always like that, and I'm sure you'd agree.
In 1969, 600 million people watched the Moon landing. The year 2024 had 366 days; 3.14159 is pi.
Prices: $12.99, 45%, 1,000,000 units, 0x1F, #42, @user, user@example.com, https://example.com/a?b=c.
def train(model, data):
    for step, batch in enumerate(data):
        loss = model(batch)
        loss.backward()
        return loss  # the end
Le café est délicieux à Paris; l'élève a réussi son examen. Où est la bibliothèque? Très bien!
Die Straße ist groß, und die Bücher sind schön. Grüße aus München. Übermäßig viele Äpfel.
El niño comió una manzana. ¿Dónde está el baño? ¡Qué día más bonito! Mañana será otro día.
Привет, мир! Как дела? Это простой текст на русском языке для проверки.
Γειά σου κόσμε. Αυτό είναι ένα κείμενο στα ελληνικά.
你好，世界！今天天气很好。我们一起学习机器学习和自然语言处理。
日本語のテキストです。東京は大きな都市です。カタカナとひらがな。
한국어 텍스트도 조금 있습니다. 안녕하세요!
Emoji: 😀 😃 😄 🎉 👍 ❤️ 🚀 — and symbols: © ® ™ € £ ¥ → ← ∞ ≠ ≤ ≥.
Tabs\tand\tnewlines\n\nand   multiple   spaces    here.
"""


def corpus_text():
    # Repeat with small variations so that frequent pairs stand out.
    lines = CORPUS.replace("\\t", "\t").replace("\\n", "\n").splitlines(keepends=True)
    out = []
    for r in range(6):
        for i, line in enumerate(lines):
            if (i + r) % 3 != 2:
                out.append(line)
    return "".join(out)


TEST_STRINGS = [
    ("ascii", "Hello world".encode()),
    ("punctuation", "Hello, world! How are you?".encode()),
    ("contractions", "don't can't I'm you're we've they'll she'd it's".encode()),
    ("upper_contractions", "DON'T SHOUT, IT'S LOUD".encode()),
    ("apostrophes", "''s 'x 'reve '' ' s".encode()),
    ("digits", "12345 67890 3.14159 1,000,000 x2y3".encode()),
    ("space_runs", "a  b   c    d".encode()),
    ("trailing_spaces", "trailing spaces   ".encode()),
    ("leading_spaces", "   leading spaces".encode()),
    ("newlines", "line one\nline two\n\nline four\n".encode()),
    ("tabs", "tabs\tand\t\tmore\ttabs".encode()),
    ("mixed_whitespace", "mixed \t\n whitespace \n\t x\n \n".encode()),
    ("crlf", "\r\n windows\r\nlines \r\n".encode()),
    ("unicode_spaces", "a\u00a0b\u3000c\u2003 d \u2028e".encode()),
    ("accents_fr", "Le café est délicieux; naïve résumé Ærøskøbing".encode()),
    ("accents_de", "Straße Größe Übermaß über".encode()),
    ("cyrillic", "Привет мир, как дела?".encode()),
    ("greek", "Γειά σου κόσμε".encode()),
    ("cjk", "你好，世界！这是一个测试。".encode()),
    ("japanese", "日本語のテキストとカタカナ".encode()),
    ("emoji", "emoji 😀🎉👍🏽 and ❤️ and 🚀rocket".encode()),
    ("other_numbers", "Arabic ٣٤٥ Devanagari ५६७ Roman Ⅻ half ½ sup ²".encode()),
    ("code", "def f(x):\n    return x**2  # comment\n".encode()),
    ("url", "URL: https://example.com/path?q=1&r=2 mail@test.org".encode()),
    ("eot_only", EOT.encode()),
    ("eot_between", ("first document" + EOT + "second document").encode()),
    ("eot_twice", (EOT + EOT + " double\n" + EOT).encode()),
    ("eot_partial", "<|endoftext <|endoftext|x <endoftext|>".encode()),
    ("invalid_bytes", b"\xff\xfe invalid \x80 bytes\xc3"),
    ("truncated_sequence", b"truncated \xe2\x82 sequence \xe2\x82\xac ok"),
    ("overlong_and_surrogate", b"overlong \xc0\xaf surrogate \xed\xa0\x80 big \xf4\x90\x80\x80 end"),
    ("invalid_in_word", b"caf\xe9 na\xefve \xe9t\xe9"),
    ("empty", b""),
    ("single_space", b" "),
    ("single_newline", b"\n"),
    ("long_word", ("supercalifragilisticexpialidocious" * 3).encode()),
    ("long_runs", ("=" * 100 + " " * 90 + "x" + "ab" * 60 + "\n" * 70).encode()),
]
TEST_STRINGS.append(("corpus", corpus_text().encode()))


def load_files(out):
    with open(os.path.join(out, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(out, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = [tuple(l.split()) for l in lines if l and not l.startswith("#version")]
    return vocab, merges


def with_hf(out, enc):
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    tok = Tokenizer(BPE.from_file(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOT])
    goldens, bad = [], 0
    for name, data in TEST_STRINGS:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        ids = tok.encode(text).ids
        ours = enc.encode(data)
        if ids != ours:
            bad += 1
            print(f"MISMATCH {name}: hf {ids} reference {ours}", file=sys.stderr)
        goldens.append({"name": name, "hex": data.hex(), "ids": ids})
    with open(os.path.join(out, "goldens_hf.json"), "w") as f:
        json.dump({"generator": "Hugging Face tokenizers", "strings": goldens}, f, indent=1)
    print(f"tokenizers: {len(goldens)} strings, {bad} mismatches")
    return bad


def bench(enc, path):
    import time
    files = [path] if os.path.isfile(path) else sorted(
        os.path.join(path, f) for f in os.listdir(path) if not f.endswith((".dat", ".u8")))
    data = b"".join(open(f, "rb").read() for f in files if os.path.isfile(f))
    start = time.perf_counter()
    ids = enc.encode(data)
    secs = time.perf_counter() - start
    print(f"reference encoder: {len(data) / 1e6:.2f} MB -> {len(ids)} tokens in {secs:.2f} s: "
          f"{len(data) / 1e6 / secs:.2f} MB/s, {len(ids) / secs:.0f} tokens/s")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "fixtures", "bpe"))
    ap.add_argument("--merges", type=int, default=300)
    ap.add_argument("--with-hf", action="store_true", help="cross-check with Hugging Face tokenizers")
    ap.add_argument("--bench", metavar="PATH", help="time the reference encoder on a text file or folder (MB/s)")
    ap.add_argument("--keep-vocab", action="store_true", help="reuse vocab.json/merges.txt in --out instead of training")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.keep_vocab:
        vocab, merges = load_files(args.out)
    else:
        vocab, merges = train(corpus_text(), args.merges)
        with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=True)  # \\u escapes, as GPT-2's encoder.json
        with open(os.path.join(args.out, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            for a, b in merges:
                f.write(f"{a} {b}\n")
    enc = Encoder(vocab, merges)
    if args.bench:
        return bench(enc, args.bench)
    goldens = []
    for name, data in TEST_STRINGS:
        ids = enc.encode(data)
        assert enc.decode(ids) == data, name
        entry = {"name": name, "hex": data.hex(), "ids": ids}
        goldens.append(entry)
    with open(os.path.join(args.out, "goldens.json"), "w") as f:
        json.dump({"generator": "scripts/bpe_reference.py (encoder.py algorithm, regex module)",
                   "vocab_size": len(vocab), "merges": len(merges), "strings": goldens}, f, indent=1)
    print(f"{len(vocab)} tokens, {len(merges)} merges, {len(goldens)} golden strings -> {args.out}")
    if args.with_hf:
        return 1 if with_hf(args.out, enc) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
