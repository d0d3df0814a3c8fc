// Golden encodings for brisk's BERT (WordPiece) tokenizer, tests/data/test_bert_tokenizer*.cpp,
// made by implementations that share no code with brisk:
//   - Hugging Face `tokenizers` 0.22.2 (its Rust core, which transformers' BertTokenizerFast runs),
//     as the Node binding npm's `@anush008/tokenizers` 0.6.0 builds it: the goldens are its
//     encodings;
//   - Hugging Face `tokenizers` 0.23.2 (npm's `tokenizers`, the official binding), which writes
//     the tokenizer.json files and encodes everything again: it agrees except where 0.23 changed
//     longest_first truncation (it first cuts each text to max_length tokens, so a pair whose
//     longer text is past max_length splits the budget as if both were that long); the script
//     lists those cases and keeps 0.22.2's answer, which is also transformers' slow tokenizer's;
//   - transformers.js (npm's `@huggingface/transformers`), a JavaScript port that loads the folders
//     as transformers does (tokenizer.json + tokenizer_config.json): every golden it can reproduce
//     (it has no truncation strategies) is checked against it, and the decodings come from it
//     (transformers' decode: the WordPiece decoder, then clean_up_tokenization).
//
// No BERT vocabulary can be downloaded here, so the script builds two from the text of Debian's
// `fortunes` package (every character, the frequent words, frequent word pieces as `##` pieces,
// and the letters and words of the hard strings below), one uncased (lower-cased, accents
// stripped) and one cased, laid out as BERT's are ([PAD] 0, [unused*], [UNK] 100, [CLS] 101,
// [SEP] 102, [MASK] 103), and writes each as a Hugging Face folder: vocab.txt,
// tokenizer_config.json and tokenizer.json (saved by `tokenizers` itself; the uncased one with
// TemplateProcessing, the cased one with BertProcessing, both as the Hub's BERT folders have them).
//
//   npm install --prefix /tmp/wp tokenizers@0.23.2 @anush008/tokenizers@0.6.0
//   npm install --prefix /tmp/wp --ignore-scripts @huggingface/transformers@4.3.2
//   NODE_PATH=/tmp/wp/node_modules node scripts/wordpiece_fixtures.cjs
//
// (--ignore-scripts: onnxruntime-node's install step downloads a GPU runtime that tokenizing does
// not use.) It writes tests/data/fixtures/wordpiece/: the two folders, goldens.json (the hard
// strings: single, pair, truncation, padding, decoding, errors) and fortunes.txt.gz (every
// fortune, encoded by both vocabularies, and pairs of consecutive fortunes truncated); and
// tests/data/fixtures/bpe_hf_tokenizer_json/tokenizer.json (for GPT2Tokenizer::from_pretrained).
"use strict";
const fs = require("fs");
const path = require("path");
const zlib = require("zlib");
const { execSync } = require("child_process");
const hf = require("tokenizers");                // 0.23.2: writes the files, cross-checks
const ref = require("@anush008/tokenizers");     // tokenizers 0.22.2: the goldens
const { AutoTokenizer, env } = require("@huggingface/transformers");

const OUT = path.join(__dirname, "..", "tests", "data", "fixtures", "wordpiece");
const FORTUNES = "/usr/share/games/fortunes";

// --- the fortunes, split as the C++ test splits them -----------------------------------------
// Every file without an extension, in name order; a fortune is the lines before a line "%".
function read_fortunes() {
  const out = [];
  for (const name of fs.readdirSync(FORTUNES).sort()) {
    if (name.includes(".")) continue;
    const text = fs.readFileSync(path.join(FORTUNES, name), "utf8");
    let lines = [];
    let index = 0;
    const parts = text.split("\n");
    if (parts.length && parts[parts.length - 1] === "") parts.pop();
    for (const line of parts) {
      if (line === "%") {
        out.push({ file: name, index: index++, text: lines.join("\n") });
        lines = [];
      } else {
        lines.push(line);
      }
    }
    if (lines.length) out.push({ file: name, index: index++, text: lines.join("\n") });
  }
  return out;
}

// FNV-1a, 64 bits, of a file's bytes: the test compares only the files that are the same.
function fnv64(bytes) {
  let h = 0xcbf29ce484222325n;
  for (const b of bytes) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, "0");
}

// FNV-1a, 32 bits, of a sequence of ids, each as 4 little-endian bytes.
function fnv32(ids) {
  let h = 0x811c9dc5;
  for (const id of ids)
    for (let k = 0; k < 4; ++k) {
      h ^= (id >>> (8 * k)) & 0xff;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  return h.toString(16).padStart(8, "0");
}

// --- the hard strings -------------------------------------------------------------------------
const LONG = "a".repeat(101);
const HARD = [
  ["empty", ""],
  ["spaces_only", "     "],
  ["whitespace_only", "\t\n\r \u00a0\u3000\u2028"],
  ["hello", "Hello, World!"],
  ["punctuation_runs", "Wait... what?!?! (yes) -- [no] {maybe} <html> @user #tag $5.00 100% a&b c*d ~/path_to/file.txt 'quoted' \"double\" `back` ^caret |pipe| \\slash"],
  ["unicode_punctuation", "\u201cQuoted\u201d \u2018single\u2019 \u2014 dash \u2013 en\u2026 \u00abguillemets\u00bb \u00bfqu\u00e9? \u00a1s\u00ed! \u00a7 \u00b6 \u2020 \u2022 \u00b7"],
  ["accents", "Caf\u00e9 na\u00efve \u00dcber stra\u00dfe S\u00e3o Paulo \u00c5ngstr\u00f6m fa\u00e7ade r\u00e9sum\u00e9 Dvo\u0159\u00e1k \u0141\u00f3d\u017a \u00c6r\u00f8sk\u00f8bing"],
  ["combining_marks", "e\u0301cole A\u030angstrom z\u0351\u0352a\u0353l\u0354g\u0355o n\u0303"],
  ["greek", "\u0391\u03b8\u03ae\u03bd\u03b1 \u03c3\u03bf\u03c6\u03af\u03b1 \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u1f45\u03c4\u03b9"],
  ["greek_final_sigma", "\u039f\u0394\u039f\u03a3 \u03a3\u039f\u03a6\u0399\u0391\u03a3"],
  ["cyrillic", "\u041c\u043e\u0441\u043a\u0432\u0430 \u0401\u043b\u043a\u0430, \u043f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440!"],
  ["cjk", "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587abc\u5b57"],
  ["cjk_compatibility", "\uf900\ufa10 \u3400\u4dbf"],
  ["cjk_supplementary", "\u{20000}\u{2A6DF}x\u{2F800}"],
  ["cjk_extension_e_start", "a\u{2B820}b\u{2B920}c"],
  ["korean", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8"],
  ["controls", "a\u0000b\u0001c\u0007d\u001be\u007ff\u0085g\ufffdh\u0008i\u000bj\u000ck\u001cl"],
  ["overstrike", "_\bH_\be_\bl_\bl_\bo w\bwo\bor\brl\bld\bd"],
  ["zero_width", "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060wj soft\u00adhyphen"],
  ["unicode_spaces", "a\u00a0b\u2002c\u2009d\u202fe\u205ff\u3000g\u1680h\u2028i\u2029j"],
  ["tabs_newlines", "line1\nline2\r\nline3\ttab\t\tend"],
  ["long_word_101", "short " + LONG + " short"],
  ["long_word_100", "short " + "a".repeat(100) + " end"],
  ["long_word_accents", "\u00e9".repeat(100) + " " + "\u00e9".repeat(101)],
  ["long_word_decomposed", "e\u0301".repeat(60)],
  ["emoji", "I \u2764 emoji \ud83d\ude00\ud83e\udd17 \ud83d\udc4d\ud83c\udffd \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 love\ud83d\ude00"],
  ["numbers", "3.14159 1,000,000 2nd 50% \u00bd \u00b2 \u0661\u0662\u0663"],
  ["special_tokens_in_text", "[CLS] hello [SEP] the [MASK] is [UNK]. [PAD][PAD]x"],
  ["special_tokens_lowercase", "[mask] and [Mask] are text"],
  ["contractions", "Don't stop-believing; it's 5 o'clock! I'm sure we've they're"],
  ["urls", "https://example.com/a?b=c&d=e user@example.org C++ e.g. U.S.A."],
  ["unknown_inside_word", "xyz\ud83e\udd17abc caf\u00e9\ud83e\udd17"],
  ["private_use", "\ue000private \udb80\udc00x"],
  ["unassigned", "\u0378a \u{1FAF9}b"],
  ["ligature", "\ufb01anc\u00e9 \ufb02ow"],
  ["turkish_dotted_i", "\u0130stanbul I\u0307 \u0131"],
  ["sharp_s_capital", "\u1e9e STRASSE"],
  ["fullwidth", "\uff28\uff45\uff4c\uff4c\uff4f\uff01"],
  ["mixed_scripts", "hello\u043c\u0438\u0440 abc\u03b1\u03b2\u03b3"],
  ["word_pieces", "unbelievable tokenization unaffordable rethinking"],
  ["repeated_punct", "!!!!!!!!!!............?????"],
  ["apostrophes", "rock 'n' roll ' '' ''' `` ''"],
];

// Pairs and options: truncation is in tokens including [CLS]/[SEP], as transformers counts it.
const PAIRS = [
  ["pair_short", "Hello there.", "General Kenobi!", {}],
  ["pair_empty_second", "Only the first.", "", {}],
  ["pair_empty_both", "", "", {}],
  ["pair_accents", "Caf\u00e9 au lait", "\u00dcber alles", {}],
  ["pair_longest_first_a_long", "one two three four five six seven eight nine ten eleven twelve", "short b", { truncation: "longest_first", max_length: 12 }],
  ["pair_longest_first_b_long", "short a", "one two three four five six seven eight nine ten eleven twelve", { truncation: "longest_first", max_length: 12 }],
  ["pair_longest_first_both_long", "one two three four five six seven eight nine ten", "alpha beta gamma delta epsilon zeta eta theta iota kappa", { truncation: "longest_first", max_length: 11 }],
  ["pair_longest_first_tie", "a b c d e f", "g h i j k l", { truncation: "longest_first", max_length: 10 }],
  ["pair_longest_first_tie_even", "a b c d e f", "g h i j k l", { truncation: "longest_first", max_length: 9 }],
  ["pair_longest_first_fits", "a b", "c d", { truncation: "longest_first", max_length: 7 }],
  // Both texts past max_length, the first longer: 0.22 (and transformers' slow tokenizer) give the
  // longer one the odd token; 0.23 cuts both to max_length first and gives it to the second.
  ["pair_longest_first_both_past_max_length", "one two three four five six seven eight nine ten eleven twelve", "alpha beta gamma delta epsilon zeta eta theta iota", { truncation: "longest_first", max_length: 8 }],
  ["pair_longest_first_only_specials", "a b c", "d e f", { truncation: "longest_first", max_length: 3 }],
  ["pair_only_first", "one two three four five six seven eight", "keep all of this", { truncation: "only_first", max_length: 10 }],
  ["pair_only_second", "keep all of this", "one two three four five six seven eight", { truncation: "only_second", max_length: 10 }],
  ["pair_only_first_too_short", "a b", "one two three four five six seven eight", { truncation: "only_first", max_length: 6 }],
  ["pair_only_second_too_short", "one two three four five six seven eight", "a b", { truncation: "only_second", max_length: 6 }],
  ["pair_only_second_exact", "a b c", "d e f", { truncation: "only_second", max_length: 8 }],
  ["single_truncated", "one two three four five six seven eight nine ten", null, { truncation: "longest_first", max_length: 8 }],
  ["single_truncated_only_first", "one two three four five six seven eight nine ten", null, { truncation: "only_first", max_length: 5 }],
  ["single_only_second_error", "one two three four five six seven eight nine ten", null, { truncation: "only_second", max_length: 5 }],
  ["single_truncated_to_specials", "one two three", null, { truncation: "longest_first", max_length: 2 }],
  ["single_truncation_not_needed", "one two", null, { truncation: "longest_first", max_length: 8 }],
  ["single_padded", "Hello, World!", null, { padding: "max_length", max_length: 12 }],
  ["pair_padded_and_truncated", "one two three four five six", "seven eight nine ten", { truncation: "longest_first", max_length: 9, padding: "max_length" }],
  ["pair_padded_multiple_of", "Hello there.", "General Kenobi!", { padding: "max_length", max_length: 10, pad_to_multiple_of: 8 }],
  ["single_wordpiece_truncated", "unbelievable tokenization", null, { truncation: "longest_first", max_length: 4 }],
];

// Batches: padded to the longest, and to a multiple.
const BATCHES = [
  ["batch_longest", ["Hello, World!", "a", "", "The quick brown fox jumps over the lazy dog."], null, { padding: "longest" }],
  ["batch_longest_multiple_of", ["Hello, World!", "a"], null, { padding: "longest", pad_to_multiple_of: 8 }],
  ["batch_pairs_truncated_padded", ["one two three four five six seven", "short"], ["a b", "alpha beta gamma delta epsilon"], { padding: "longest", truncation: "longest_first", max_length: 8 }],
];

// Words of the hard strings that the vocabularies should know (so that they are split into
// pieces, not [UNK]); everything else in them is left to the fortunes' vocabulary.
const EXTRA_TEXT = [
  "Caf\u00e9 cafe na\u00efve naive \u00dcber uber stra\u00dfe strasse S\u00e3o Paulo \u00c5ngstr\u00f6m angstrom fa\u00e7ade facade r\u00e9sum\u00e9 resume \u00e9cole ecole",
  "\u0391\u03b8\u03ae\u03bd\u03b1 \u03c3\u03bf\u03c6\u03af\u03b1 \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03bf\u03b4\u03bf\u03c2 \u03bf\u03b4\u03bf\u03c3 \u039f\u0394\u039f\u03a3 \u03c3\u03bf\u03c6\u03b9\u03b1\u03c2",
  "\u041c\u043e\u0441\u043a\u0432\u0430 \u043c\u043e\u0441\u043a\u0432\u0430 \u043f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440 \u0451\u043b\u043a\u0430 \u0435\u043b\u043a\u0430",
  "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8 \u65e5\u672c\u8a9e \u4e2d\u6587 \uf900 \u3400 \u{20000}",
  "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
  "istanbul Istanbul strasse STRASSE \u00df \u1e9e emoji \u2764 \ud83d\ude00 love",
  "hello Hello world World unbelievable believable believe tokenization token unaffordable afford rethinking thinking",
  "example com org user path file txt html tag caret pipe slash quoted double back",
  "zero width non joiner bom wj soft hyphen private line1 line2 line3 tab end short",
  "alpha beta gamma delta epsilon zeta eta theta iota kappa one two three four five six seven eight nine ten eleven twelve",
  "General Kenobi there Only first Keep all of this au lait alles rock roll",
];

// --- building a vocabulary --------------------------------------------------------------------
function normalizer(cased) {
  return hf.bertNormalizer({ cleanText: true, handleChineseChars: true, stripAccents: !cased, lowercase: !cased });
}

function words_of(texts, cased) {
  const norm = normalizer(cased);
  const pre = hf.bertPreTokenizer();
  const counts = new Map();
  for (const t of texts) {
    for (const [w] of pre.preTokenizeString(norm.normalizeString(t))) counts.set(w, (counts.get(w) || 0) + 1);
  }
  return counts;
}

const PUNCT = /^[\p{P}\u0021-\u002F\u003A-\u0040\u005B-\u0060\u007B-\u007E]$/u;
// Characters no vocabulary gets, so that [UNK] shows up: one emoji and one CJK character.
const LEFT_OUT = new Set(["\ud83e\udd17", "\u5b57"]);

function build_vocab(fortunes, cased) {
  const counts = words_of(fortunes.map((f) => f.text), cased);
  const extra = words_of(EXTRA_TEXT, cased);
  const specials = ["[PAD]"];
  for (let i = 0; i < 99; ++i) specials.push(`[unused${i}]`);
  specials.push("[UNK]", "[CLS]", "[SEP]", "[MASK]");
  for (let i = 99; i < 120; ++i) specials.push(`[unused${i}]`);
  const chars = new Set();
  for (const m of [counts, extra])
    for (const w of m.keys()) for (const c of w) if (!LEFT_OUT.has(c)) chars.add(c);
  // Greek and Cyrillic alphabets, and the Latin-1 letters (cased: with their capitals).
  for (let cp = 0x3b1; cp <= 0x3c9; ++cp) chars.add(String.fromCodePoint(cp));
  for (let cp = 0x430; cp <= 0x44f; ++cp) chars.add(String.fromCodePoint(cp));
  if (cased) {
    for (let cp = 0x391; cp <= 0x3a9; ++cp) if (cp !== 0x3a2) chars.add(String.fromCodePoint(cp));
    for (let cp = 0x410; cp <= 0x42f; ++cp) chars.add(String.fromCodePoint(cp));
    for (let cp = 0xc0; cp <= 0xff; ++cp) if (cp !== 0xd7 && cp !== 0xf7) chars.add(String.fromCodePoint(cp));
  }
  const sorted_chars = [...chars].sort((a, b) => a.codePointAt(0) - b.codePointAt(0));
  const vocab = [...specials, ...sorted_chars];
  const have = new Set(vocab);
  const add = (t) => {
    if (!have.has(t)) {
      have.add(t);
      vocab.push(t);
    }
  };
  for (const c of sorted_chars) if (!PUNCT.test(c) && !/\p{Ideographic}/u.test(c)) add("##" + c);
  // Words: the hard strings' own, then the fortunes' by frequency (ties by the word).
  for (const w of [...extra.keys()].sort()) if (![...w].some((c) => LEFT_OUT.has(c))) add(w);
  const ranked = [...counts.entries()].filter(([w, n]) => n >= 3 && [...w].length > 1)
                  .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  for (const [w] of ranked.slice(0, 3500)) add(w);
  // Pieces of the words left out, weighted by how often the words occur: suffix pieces (##)
  // of 2 to 6 characters and word beginnings of 2 to 6 characters.
  const suffix = new Map(), prefix = new Map();
  for (const [w, n] of counts) {
    if (have.has(w)) continue;
    const cs = [...w];
    if (cs.length > 30 || cs.some((c) => PUNCT.test(c))) continue;
    for (let j = 2; j <= Math.min(6, cs.length - 1); ++j) {
      const p = cs.slice(0, j).join("");
      prefix.set(p, (prefix.get(p) || 0) + n);
    }
    for (let i = 1; i < cs.length; ++i)
      for (let j = i + 2; j <= Math.min(cs.length, i + 6); ++j) {
        const s = "##" + cs.slice(i, j).join("");
        suffix.set(s, (suffix.get(s) || 0) + n);
      }
  }
  const top = (m, k) => [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, k);
  for (const [p] of top(prefix, 400)) add(p);
  for (const [s] of top(suffix, 1200)) add(s);
  return vocab;
}

// --- the tokenizer folders --------------------------------------------------------------------
const SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

async function write_folder(dir, vocab, cased) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "vocab.txt"), vocab.join("\n") + "\n");
  const config = {
    do_lower_case: !cased,
    strip_accents: null,
    tokenize_chinese_chars: true,
    model_max_length: 512,
    clean_up_tokenization_spaces: true,
    cls_token: "[CLS]", sep_token: "[SEP]", pad_token: "[PAD]", unk_token: "[UNK]", mask_token: "[MASK]",
    tokenizer_class: "BertTokenizer",
  };
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
  const model = await hf.WordPiece.fromFile(path.join(dir, "vocab.txt"), { unkToken: "[UNK]", continuingSubwordPrefix: "##", maxInputCharsPerWord: 100 });
  const tok = new hf.Tokenizer(model);
  tok.setNormalizer(normalizer(cased));
  tok.setPreTokenizer(hf.bertPreTokenizer());
  const cls = vocab.indexOf("[CLS]"), sep = vocab.indexOf("[SEP]");
  tok.setPostProcessor(cased ? hf.bertProcessing(["[SEP]", sep], ["[CLS]", cls])
                             : hf.templateProcessing("[CLS] $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                                                     [["[CLS]", cls], ["[SEP]", sep]]));
  tok.setDecoder(hf.wordPieceDecoder("##", true));
  tok.addSpecialTokens(SPECIAL);
  tok.save(path.join(dir, "tokenizer.json"), true);
  // The Node binding takes strip_accents as a boolean; BERT's uncased files say null ("as
  // lowercase"), which means the same: write that, so that the loader reads the Hub's form.
  if (!cased) {
    const j = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
    j.normalizer.strip_accents = null;
    fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(j, null, 2) + "\n");
  }
  // The saved file, loaded back by both versions.
  return { ref: ref.Tokenizer.fromFile(path.join(dir, "tokenizer.json")), hf: hf.Tokenizer.fromFile(path.join(dir, "tokenizer.json")) };
}

const STRATEGY = { longest_first: "LongestFirst", only_first: "OnlyFirst", only_second: "OnlySecond" };

// Encodes with `tokenizers` as transformers' fast tokenizer does for these options.
async function hf_encode(tok, texts, pairs, opt) {
  tok.disableTruncation();
  tok.disablePadding();
  if (opt.truncation) tok.setTruncation(opt.max_length, { strategy: STRATEGY[opt.truncation] });
  if (opt.padding === "max_length") tok.setPadding({ maxLength: opt.max_length, padToMultipleOf: opt.pad_to_multiple_of, padId: 0, padToken: "[PAD]" });
  if (opt.padding === "longest") tok.setPadding({ padToMultipleOf: opt.pad_to_multiple_of, padId: 0, padToken: "[PAD]" });
  let encs;
  if (!pairs) {
    encs = await tok.encodeBatch(texts);
  } else {
    // This binding's encodeBatch takes no pairs: one encode each, then padded to the longest
    // by the binding's own Encoding.pad, as encodeBatch pads.
    tok.disablePadding();
    if (opt.padding === "max_length") tok.setPadding({ maxLength: opt.max_length, padToMultipleOf: opt.pad_to_multiple_of, padId: 0, padToken: "[PAD]" });
    encs = [];
    for (let i = 0; i < texts.length; ++i) encs.push(await tok.encode(texts[i], pairs[i]));
    if (opt.padding === "longest") {
      const longest = Math.max(...encs.map((e) => e.getLength()));
      for (const e of encs) e.pad(longest, { padId: 0, padToken: "[PAD]", padToMultipleOf: opt.pad_to_multiple_of });
    }
  }
  return encs.map((e) => ({ ids: e.getIds(), type_ids: e.getTypeIds(), mask: e.getAttentionMask(),
                            special: e.getSpecialTokensMask(), tokens: e.getTokens() }));
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

// GPT2Tokenizer::from_pretrained reads tokenizer.json too: the small byte-level BPE of
// tests/data/fixtures/bpe_hf (vocab.json, merges.txt) saved by `tokenizers` as tokenizer.json.
async function write_bpe_tokenizer_json() {
  const src = path.join(__dirname, "..", "tests", "data", "fixtures", "bpe_hf");
  const dir = path.join(__dirname, "..", "tests", "data", "fixtures", "bpe_hf_tokenizer_json");
  fs.mkdirSync(dir, { recursive: true });
  const tok = new hf.Tokenizer(await hf.BPE.fromFile(path.join(src, "vocab.json"), path.join(src, "merges.txt")));
  tok.setPreTokenizer(hf.byteLevelPreTokenizer(false, true));
  tok.setPostProcessor(hf.byteLevelProcessing(true));
  tok.addSpecialTokens(["<|endoftext|>"]);
  const file = path.join(dir, "tokenizer.json");
  tok.save(file, true);
  // The Node binding has no ByteLevel decoder to set: written in as GPT-2's tokenizer.json has
  // it, and the file loaded back by `tokenizers` to check that it still reads it.
  const j = JSON.parse(fs.readFileSync(file, "utf8"));
  j.decoder = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true };
  fs.writeFileSync(file, JSON.stringify(j, null, 2) + "\n");
  hf.Tokenizer.fromFile(file);
}

async function main() {
  await write_bpe_tokenizer_json();
  const fortunes = read_fortunes();
  const version = execSync("dpkg-query -W -f='${Version}' fortunes").toString();
  const variants = {};
  for (const cased of [false, true]) {
    const name = cased ? "cased" : "uncased";
    const vocab = build_vocab(fortunes, cased);
    const toks = await write_folder(path.join(OUT, name), vocab, cased);
    env.allowRemoteModels = false;
    env.localModelPath = OUT + "/";
    const js = await AutoTokenizer.from_pretrained(name);
    variants[name] = { vocab, tok: toks.ref, hf: toks.hf, js };
    console.log(`${name}: ${vocab.length} tokens`);
  }

  // Hard strings, pairs and batches, with both vocabularies.
  const cases = [];
  let js_checked = 0, js_differ = [], hf_differ = [];
  const all = [
    ...HARD.map(([n, t]) => [n, [t], null, {}]),
    ...PAIRS.map(([n, a, b, o]) => [n, [a], b === null ? null : [b], o]),
    ...BATCHES,
  ];
  for (const [vname, v] of Object.entries(variants)) {
    for (const [name, texts, pairs, opt] of all) {
      const c = { variant: vname, name, texts, ...(pairs ? { pairs } : {}), options: opt };
      let encs;
      try {
        encs = await hf_encode(v.tok, texts, pairs, opt);
      } catch (e) {
        c.error = String(e.message || e);
        cases.push(c);
        continue;
      }
      c.encodings = encs.map(({ ids, type_ids, mask, special, tokens }) => ({ ids, type_ids, mask, special, tokens }));
      let again;
      try {
        again = await hf_encode(v.hf, texts, pairs, opt);
      } catch (e) {
        again = String(e.message || e);
      }
      if (!same(again, encs)) hf_differ.push(`${vname}/${name}`);
      // transformers.js: no truncation strategies (it cuts the end off) and no pad_to_multiple_of.
      if (!opt.truncation && !opt.pad_to_multiple_of) {
        const jsopt = { text_pair: pairs, return_tensor: false, return_token_type_ids: true };
        if (opt.padding) Object.assign(jsopt, { padding: opt.padding === "longest" ? true : "max_length", max_length: opt.max_length });
        const r = v.js(texts, jsopt);
        js_checked++;
        const theirs = r.input_ids.map((ids, i) => ({ ids, type_ids: r.token_type_ids[i], mask: r.attention_mask[i] }));
        const ours = encs.map(({ ids, type_ids, mask }) => ({ ids, type_ids, mask }));
        if (!same(theirs, ours)) {
          js_differ.push(`${vname}/${name}`);
          c.transformers_js = theirs;
        }
      }
      // Decoding (transformers.js = transformers' decode), with and without special tokens.
      c.decoded = encs.map((e) => (e.ids.length ? v.js.decode(e.ids, { skip_special_tokens: false }) : ""));
      c.decoded_skip_special = encs.map((e) => (e.ids.length ? v.js.decode(e.ids, { skip_special_tokens: true }) : ""));
      cases.push(c);
    }
  }
  console.log(`hard cases: ${cases.length}; tokenizers 0.23.2 differs on: ${hf_differ.join(", ") || "none"}`);
  console.log(`checked against transformers.js: ${js_checked}; it differs on: ${js_differ.join(", ") || "none"}`);
  fs.writeFileSync(path.join(OUT, "goldens.json"),
                   JSON.stringify({ generator: "scripts/wordpiece_fixtures.cjs: tokenizers 0.22.2 (npm @anush008/tokenizers 0.6.0), decodings by @huggingface/transformers 4.3.2", cases }, null, 0)
                       .replace(/\},\{"variant"/g, '},\n{"variant"') + "\n");

  // Every fortune, encoded with both vocabularies (730,000 tokens each: 2.5 MB compressed), is
  // stored compactly: per fortune its token count and a 32-bit FNV-1a hash of its ids, which the
  // test recomputes; the ids themselves for every 64th fortune (so that a failure can be read),
  // and every 32nd fortune paired with the next one, truncated longest-first to 48 tokens and
  // padded to 48, with its type ids and attention mask. Per file, the hash of its bytes: the test
  // compares only the files that are the same as here.
  const lines = [`# Debian fortunes ${version}: ${fortunes.length} fortunes, encoded by tokenizers 0.22.2 (scripts/wordpiece_fixtures.cjs)`,
                 "# F file fnv1a64(bytes) count | per fortune: uncased_count uncased_fnv1a32 cased_count cased_fnv1a32 |",
                 "# I global_index uncased_ids | P global_index (with the next) ids type_ids attention_mask"];
  const single = {};
  for (const [vname, v] of Object.entries(variants)) {
    single[vname] = await hf_encode(v.tok, fortunes.map((f) => f.text), null, {});
    // Singles: all type ids 0, mask all 1 (checked here; the file keeps the ids only).
    for (const e of single[vname]) if (e.type_ids.some((x) => x !== 0) || e.mask.some((x) => x !== 1)) throw new Error("unexpected single encoding");
    const r = v.js(fortunes.map((f) => f.text), { return_tensor: false, padding: false, truncation: false });
    const again = await hf_encode(v.hf, fortunes.map((f) => f.text), null, {});
    let differ = 0, hf_differ = 0;
    r.input_ids.forEach((ids, i) => { if (!same(ids, single[vname][i].ids)) differ++; });
    again.forEach((e, i) => { if (!same(e.ids, single[vname][i].ids)) hf_differ++; });
    console.log(`${vname}: ${fortunes.length} fortunes, ${single[vname].reduce((n, e) => n + e.ids.length, 0)} tokens, ` +
                `tokenizers 0.23.2 differs on ${hf_differ}, transformers.js on ${differ}`);
  }
  let file = null;
  fortunes.forEach((f, i) => {
    if (f.file !== file) {
      file = f.file;
      const bytes = fs.readFileSync(path.join(FORTUNES, file));
      lines.push(["F", file, fnv64(bytes), fortunes.filter((g) => g.file === file).length].join(" "));
    }
    const u = single.uncased[i].ids, c = single.cased[i].ids;
    lines.push([u.length, fnv32(u), c.length, fnv32(c)].join(" "));
  });
  for (let i = 0; i < fortunes.length; i += 64) lines.push(["I", i, ...single.uncased[i].ids].join(" "));
  const firsts = [], seconds = [], where = [];
  for (let i = 0; i + 1 < fortunes.length; i += 32) {
    firsts.push(fortunes[i].text);
    seconds.push(fortunes[i + 1].text);
    where.push(i);
  }
  const pair_opt = { truncation: "longest_first", max_length: 48, padding: "max_length" };
  const pairs = await hf_encode(variants.uncased.tok, firsts, seconds, pair_opt);
  const pairs_again = await hf_encode(variants.uncased.hf, firsts, seconds, pair_opt);
  console.log(`pairs: tokenizers 0.23.2 differs on ${pairs.filter((e, k) => !same(e.ids, pairs_again[k].ids)).length} of ${pairs.length}`);
  pairs.forEach((e, k) => lines.push(["P", where[k], e.ids.join(","), e.type_ids.join(""), e.mask.join("")].join(" ")));
  fs.writeFileSync(path.join(OUT, "fortunes.txt.gz"), zlib.gzipSync(Buffer.from(lines.join("\n") + "\n"), { level: 9 }));
  console.log(`fortunes.txt.gz: ${fortunes.length} fortunes, ${pairs.length} pairs`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
