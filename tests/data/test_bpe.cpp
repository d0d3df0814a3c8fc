// GPT-2's BPE tokenizer: golden encodings made by an independent implementation
// (scripts/bpe_reference.py: encoder.py's algorithm with the `regex` module, over a vocabulary it
// trained), a vocabulary and merges written here, the pre-tokenisation regex case by case, the
// special token, invalid UTF-8, round trips, and the errors for bad files and ids.
#include <gtest/gtest.h>

#include <brisk/data/bpe.h>
#include <brisk/util/json.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

#include "common/bpe_bytes.h"
#include "common/errors.h"
#include "data/temp_dir.h"

using namespace brisk;
using brisk::testing::expect_error;
using data::GPT2Tokenizer;

using brisk::testing::byte_char;
using brisk::testing::mapped;

namespace {

const std::string kFixtures = std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/bpe/";

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// A vocabulary of the 256 bytes (ids 0..255 in byte order) + `extra` tokens (given as bytes),
// and merges (pairs of byte strings) in rank order.
struct SmallVocab {
  std::vector<std::string> extra;
  std::vector<std::pair<std::string, std::string>> merges;
  bool with_eot = true;
  std::string vocab_json() const {
    json::Value v = json::Value::object();
    for (int b = 0; b < 256; ++b) v.set(byte_char(static_cast<unsigned char>(b)), b);
    int64_t id = 256;
    for (const std::string& t : extra) v.set(mapped(t), id++);
    if (with_eot) v.set("<|endoftext|>", id++);
    return v.dump();
  }
  std::string merges_txt() const {
    std::string s = "#version: 0.2\n";
    for (auto& [a, b] : merges) s += mapped(a) + " " + mapped(b) + "\n";
    return s;
  }
  GPT2Tokenizer load() const { return GPT2Tokenizer::from_strings(vocab_json(), merges_txt()); }
  int32_t id(const std::string& t) const {
    if (t.size() == 1) return static_cast<unsigned char>(t[0]);
    for (size_t i = 0; i < extra.size(); ++i)
      if (extra[i] == t) return static_cast<int32_t>(256 + i);
    ADD_FAILURE() << "no token " << t;
    return -1;
  }
};

SmallVocab hello_vocab() {
  SmallVocab v;
  v.extra = {"he", "ll", "hell", "hello", " w", "or", " wor", "ld", " world"};
  v.merges = {{"h", "e"}, {"l", "l"},   {"he", "ll"}, {"hell", "o"}, {" ", "w"},
              {"o", "r"}, {" w", "or"}, {"l", "d"},   {" wor", "ld"}};
  return v;
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view p : GPT2Tokenizer::pretokenize(text)) out.emplace_back(p);
  return out;
}

}  // namespace

// Every string of a goldens file (hex bytes and the ids a reference implementation gave them)
// encodes to the same ids and decodes back; returns how many strings were checked.
size_t check_goldens(const GPT2Tokenizer& tok, const std::string& file, size_t* merged_tokens) {
  json::Value goldens = json::parse(brisk::testing::read_file(file));
  EXPECT_EQ(tok.vocab_size(), goldens.at("vocab_size").as_int()) << file;
  EXPECT_EQ(tok.num_merges(), goldens.at("merges").as_int()) << file;
  const auto& strings = goldens.at("strings").as_array();
  for (const json::Value& g : strings) {
    const std::string name = g.at("name").as_string();
    const std::string text = from_hex(g.at("hex").as_string());
    std::vector<int32_t> want;
    for (const json::Value& id : g.at("ids").as_array()) want.push_back(static_cast<int32_t>(id.as_int()));
    std::vector<int32_t> got = tok.encode(text);
    EXPECT_EQ(got, want) << file << ": " << name;
    EXPECT_EQ(tok.decode(got), text) << file << ": " << name;
    for (int32_t id : got) *merged_tokens += id >= 256 && id != tok.eot_token();
  }
  return strings.size();
}

TEST(GPT2Tokenizer, MatchesTheReferenceImplementationsGoldenEncodings) {
  // A vocabulary of 300 merges trained by scripts/bpe_reference.py, and its encodings.
  GPT2Tokenizer tok = GPT2Tokenizer::from_files(kFixtures + "vocab.json", kFixtures + "merges.txt");
  size_t merged = 0;
  EXPECT_GE(check_goldens(tok, kFixtures + "goldens.json", &merged), 30u);
  EXPECT_GT(merged, 50u);  // the merges matter, not only the bytes
}

TEST(GPT2Tokenizer, MatchesHuggingFaceTokenizersOnAVocabularyItTrained) {
  // Vocabulary, merges and encodings all made by Hugging Face `tokenizers` (scripts/hf_bpe_fixtures.py,
  // run where that package is installed: the GPU machines).
  const std::string dir = std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/bpe_hf/";
  if (!std::filesystem::exists(dir + "goldens.json"))
    GTEST_SKIP() << "no " << dir << "goldens.json: run scripts/hf_bpe_fixtures.py where Hugging Face tokenizers is "
                 << "installed (scripts/gpu-check.sh's gpt2 stage does) and commit its files";
  GPT2Tokenizer tok = GPT2Tokenizer::from_files(dir + "vocab.json", dir + "merges.txt");
  size_t merged = 0;
  EXPECT_GE(check_goldens(tok, dir + "goldens.json", &merged), 25u);
  EXPECT_GT(merged, 50u);
}

TEST(GPT2Tokenizer, GPT2sOwnVocabularyMatchesEncoderPyAndTiktoken) {
  // OpenAI's GPT-2 files (tests/data/fixtures/gpt2/README.md), with the encodings of
  // scripts/bpe_reference.py (encoder.py's algorithm; invalid UTF-8 included) and of tiktoken's
  // "gpt2" encoding (scripts/bpe_tiktoken.cjs; valid UTF-8 only).
  const std::string dir = std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/gpt2/";
  GPT2Tokenizer tok = GPT2Tokenizer::from_files(dir + "vocab.json", dir + "merges.txt");
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eot_token(), 50256);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  size_t merged = 0;
  EXPECT_GE(check_goldens(tok, dir + "goldens.json", &merged), 30u);
  EXPECT_GE(check_goldens(tok, dir + "goldens_tiktoken.json", &merged), 30u);
  EXPECT_GT(merged, 1000u);
}

TEST(GPT2Tokenizer, SmallVocabularyWrittenHere) {
  SmallVocab v = hello_vocab();
  GPT2Tokenizer tok = v.load();
  EXPECT_EQ(tok.vocab_size(), 256 + 9 + 1);
  EXPECT_EQ(tok.num_merges(), 9);
  EXPECT_EQ(tok.eot_token(), 265);
  EXPECT_EQ(tok.name(), "gpt2-bpe(266)");
  EXPECT_EQ(tok.encode("hello world"), (std::vector<int32_t>{v.id("hello"), v.id(" world")}));
  EXPECT_EQ(tok.encode("hello  world!"), (std::vector<int32_t>{v.id("hello"), v.id(" "), v.id(" world"), v.id("!")}));
  EXPECT_EQ(tok.encode("shell"), (std::vector<int32_t>{v.id("s"), v.id("hell")}));
  EXPECT_EQ(tok.encode("hellohello"), (std::vector<int32_t>{v.id("hello"), v.id("hello")}));
  EXPECT_EQ(tok.encode("lll"), (std::vector<int32_t>{v.id("ll"), v.id("l")}));  // left to right
  EXPECT_EQ(tok.decode(tok.encode("hello world")), "hello world");
  EXPECT_EQ(tok.encode(""), std::vector<int32_t>{});
}

TEST(GPT2Tokenizer, MergesApplyLowestRankFirst) {
  SmallVocab v;
  v.extra = {"bc", "ab"};
  v.merges = {{"b", "c"}, {"a", "b"}};
  EXPECT_EQ(v.load().encode("abc"), (std::vector<int32_t>{v.id("a"), v.id("bc")}));
  v.merges = {{"a", "b"}, {"b", "c"}};
  EXPECT_EQ(v.load().encode("abc"), (std::vector<int32_t>{v.id("ab"), v.id("c")}));
  // A pair listed twice takes its last rank (encoder.py builds its ranks with dict(zip(...))).
  v.merges = {{"a", "b"}, {"b", "c"}, {"a", "b"}};
  EXPECT_EQ(v.load().encode("abc"), (std::vector<int32_t>{v.id("a"), v.id("bc")}));
}

// encoder.py's bpe() on strings, written out again: the check for the linked-list-and-heap merge
// loop that long pre-tokens take (and the plain one short ones take).
std::vector<std::string> naive_bpe(const std::string& piece,
                                   const std::vector<std::pair<std::string, std::string>>& merges) {
  std::map<std::pair<std::string, std::string>, size_t> ranks;
  for (size_t i = 0; i < merges.size(); ++i) ranks[merges[i]] = i;  // a repeated pair keeps its last rank
  std::vector<std::string> w;
  for (char c : piece) w.emplace_back(1, c);
  while (w.size() > 1) {
    size_t best = SIZE_MAX;
    std::pair<std::string, std::string> bp;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = ranks.find({w[i], w[i + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        bp = it->first;
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<std::string> nw;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == bp.first && w[i + 1] == bp.second) {
        nw.push_back(bp.first + bp.second);
        i += 2;
      } else {
        nw.push_back(w[i++]);
      }
    }
    w = nw;
  }
  return w;
}

TEST(GPT2Tokenizer, LongAndShortPiecesMergeAsEncoderPyDoes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    // Random merges over {a, b, c}, in creation order or shuffled (ranks need not follow creation).
    SmallVocab v;
    std::vector<std::string> toks = {"a", "b", "c"};
    while (v.merges.size() < 30) {
      const std::string& x = toks[rng() % toks.size()];
      const std::string& y = toks[rng() % toks.size()];
      const std::string xy = x + y;
      if (xy.size() > 8 || std::find(toks.begin(), toks.end(), xy) != toks.end()) continue;
      v.merges.emplace_back(x, y);
      v.extra.push_back(xy);
      toks.push_back(xy);
    }
    if (trial % 2) std::shuffle(v.merges.begin(), v.merges.end(), rng);
    if (trial % 5 == 0) v.merges.push_back(v.merges[rng() % v.merges.size()]);  // a repeated pair
    GPT2Tokenizer tok = v.load();
    for (size_t len : {5, 40, 64, 65, 200, 1000}) {
      std::string word;
      for (size_t i = 0; i < len; ++i) word.push_back("abc"[rng() % (trial % 3 == 0 ? 1 : 3)]);
      std::vector<int32_t> want;
      for (const std::string& t : naive_bpe(word, v.merges)) want.push_back(v.id(t));
      EXPECT_EQ(tok.encode(word), want) << "trial " << trial << ", " << len << " letters: " << word;
    }
  }
  // Merges listed before their parts exist: "ab a" first, then "a b". encoder.py merges every
  // "a b" of the word in one round, so no "ab a" pair ever forms; a merge loop that took one
  // occurrence at a time would make "aba".
  SmallVocab v;
  v.extra = {"ab", "aba"};
  v.merges = {{"ab", "a"}, {"a", "b"}};
  std::string abab;
  for (int i = 0; i < 50; ++i) abab += "ab";
  EXPECT_EQ(v.load().encode(abab), std::vector<int32_t>(50, v.id("ab")));
  EXPECT_EQ(v.load().encode("abab"), std::vector<int32_t>(2, v.id("ab")));
}

TEST(GPT2Tokenizer, PretokenizationFollowsTheRegex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("don't I'm we'll they've you're she'd it's"),
            (V{"don", "'t", " I", "'m", " we", "'ll", " they", "'ve", " you", "'re", " she", "'d", " it", "'s"}));
  EXPECT_EQ(pieces("DON'T"), (V{"DON", "'", "T"}));  // contractions are lower case only
  EXPECT_EQ(pieces("''s 'sun"), (V{"''", "s", " '", "sun"}));
  EXPECT_EQ(pieces("'s"), (V{"'s"}));
  EXPECT_EQ(pieces("abc123def 45"), (V{"abc", "123", "def", " 45"}));
  EXPECT_EQ(pieces("a, b!? (c)"), (V{"a", ",", " b", "!?", " (", "c", ")"}));
  // \s+(?!\S): a run of spaces leaves its last one to the next word.
  EXPECT_EQ(pieces("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(pieces("a    b"), (V{"a", "   ", " b"}));
  EXPECT_EQ(pieces("a   "), (V{"a", "   "}));
  EXPECT_EQ(pieces("  a"), (V{" ", " a"}));
  EXPECT_EQ(pieces("a\nb"), (V{"a", "\n", "b"}));
  EXPECT_EQ(pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(pieces("a\n\n\tb"), (V{"a", "\n\n", "\t", "b"}));
  EXPECT_EQ(pieces("a \n b"), (V{"a", " \n", " b"}));
  EXPECT_EQ(pieces("x\n \n"), (V{"x", "\n \n"}));
  EXPECT_EQ(pieces(" "), (V{" "}));
  EXPECT_EQ(pieces(""), V{});
  // Unicode classes: letters, numbers, other spaces.
  EXPECT_EQ(pieces("café naïve"), (V{"café", " naïve"}));
  EXPECT_EQ(pieces("你好，世界"), (V{"你好", "，", "世界"}));
  EXPECT_EQ(pieces("x ½² ٣٤"), (V{"x", " ½²", " ٣٤"}));
  EXPECT_EQ(pieces("a\u00a0b\u3000\u3000c"), (V{"a", "\u00a0", "b", "\u3000", "\u3000", "c"}));
  EXPECT_EQ(pieces("go 🚀🚀!"), (V{"go", " 🚀🚀!"}));
  // Invalid UTF-8: every bad byte is one character of the "other" class.
  EXPECT_EQ(pieces("caf\xe9 x"), (V{"caf", "\xe9", " x"}));
  EXPECT_EQ(pieces("a\xe2\x82z"), (V{"a", "\xe2\x82", "z"}));
  EXPECT_EQ(pieces("a \xff\xfe!b"), (V{"a", " \xff\xfe!", "b"}));
  EXPECT_EQ(pieces("\xed\xa0\x80x"), (V{"\xed\xa0\x80", "x"}));  // an encoded surrogate is not valid
  EXPECT_STRNE(GPT2Tokenizer::unicode_version(), "");
}

TEST(GPT2Tokenizer, EndOfTextIsTheSpecialTokenWhenTheVocabularyHasIt) {
  SmallVocab v = hello_vocab();
  GPT2Tokenizer tok = v.load();
  const int32_t eot = tok.eot_token();
  EXPECT_EQ(tok.encode("<|endoftext|>"), std::vector<int32_t>{eot});
  EXPECT_EQ(tok.encode("hello<|endoftext|> world"), (std::vector<int32_t>{v.id("hello"), eot, v.id(" world")}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{eot, eot}), "<|endoftext|><|endoftext|>");
  // The pieces around it are pre-tokenised apart: "a " + eot + "b" keeps the space alone.
  EXPECT_EQ(tok.encode("a <|endoftext|>b"), (std::vector<int32_t>{'a', ' ', eot, 'b'}));
  // Without it in the vocabulary the text is ordinary text.
  v.with_eot = false;
  GPT2Tokenizer plain = v.load();
  EXPECT_EQ(plain.eot_token(), -1);
  std::vector<int32_t> ids = plain.encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(plain.decode(ids), "<|endoftext|>");
}

TEST(GPT2Tokenizer, DecodeOfEncodeGivesAnyBytesBack) {
  GPT2Tokenizer tok = GPT2Tokenizer::from_files(kFixtures + "vocab.json", kFixtures + "merges.txt");
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a",  "e",   "t",    " ", "  ",   "\n",   "'s",       "'",
                                  "1",  "é",   "中",   "😀", "\xff", "\x80", "\xe2\x82", "<|endoftext|>",
                                  "\t", "the", " the", ".", "\xc3"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      if (rng() % 4 == 0) {
        s.push_back(static_cast<char>(rng() & 0xFF));
      } else {
        s += alphabet[rng() % std::size(alphabet)];
      }
    }
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
  }
}

TEST(GPT2Tokenizer, ErrorsNameTheFileLineOrId) {
  brisk::testing::TempDir dir;
  SmallVocab v = hello_vocab();
  brisk::testing::write_file(dir.file("vocab.json"), v.vocab_json());
  brisk::testing::write_file(dir.file("merges.txt"), v.merges_txt());
  EXPECT_NO_THROW(GPT2Tokenizer::from_files(dir.file("vocab.json"), dir.file("merges.txt")));
  expect_error([&] { GPT2Tokenizer::from_files(dir.file("missing.json"), dir.file("merges.txt")); }, "missing.json");
  expect_error([&] { GPT2Tokenizer::from_files(dir.file("vocab.json"), dir.file("nope.txt")); }, "nope.txt");

  brisk::testing::write_file(dir.file("bad.json"), "{\"a\": 0, \"b\": }");
  expect_error([&] { GPT2Tokenizer::from_files(dir.file("bad.json"), dir.file("merges.txt")); }, "bad.json");
  expect_error([&] { GPT2Tokenizer::from_strings("[1, 2]", ""); }, "object");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"a\": \"x\"}", ""); }, "\"a\"");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"a\": -1}", ""); }, "non-negative");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"a\": 1.5}", ""); }, "non-negative integer");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"a\": 0, \"a\": 1}", ""); }, "vocab.json");
  expect_error([&] { GPT2Tokenizer::from_strings("{}", ""); }, "no tokens");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"a\": 0, \"b\": 5}", ""); }, "id 5, outside [0, 2)");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"a\": 0, \"b\": 0}", ""); }, "id 0 is given to two tokens");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"\\u4e2d\": 0}", ""); }, "byte alphabet");
  expect_error([&] { GPT2Tokenizer::from_strings("{\"a\": 0}", ""); }, "no token for byte 0x00");

  const std::string vocab = v.vocab_json();
  expect_error([&] { GPT2Tokenizer::from_strings(vocab, "#version: 0.2\nh e\nhe\n", "v.json", "m.txt"); },
               "'m.txt' line 3");
  expect_error([&] { GPT2Tokenizer::from_strings(vocab, "h  e\n"); }, "line 1: expected two tokens");
  expect_error([&] { GPT2Tokenizer::from_strings(vocab, "h e x\n"); }, "line 1");
  expect_error([&] { GPT2Tokenizer::from_strings(vocab, "h e\nhe lo\n"); }, "line 2: token \"lo\" is not in");
  expect_error([&] { GPT2Tokenizer::from_strings(vocab, "h e\nl o\n"); }, "line 2: the merged token \"lo\"");
  expect_error([&] { GPT2Tokenizer::from_strings(vocab, "h \xe4\xb8\xad\n"); }, "byte alphabet");
  // A merges file with Windows line ends and no "#version" line is fine.
  EXPECT_EQ(GPT2Tokenizer::from_strings(vocab, "h e\r\nl l\r\n").num_merges(), 2);

  GPT2Tokenizer tok = v.load();
  const std::vector<int32_t> bad{1, 2, 266};
  expect_error([&] { tok.decode(bad); }, "token id 266 at position 2 is out of range [0, 266)");
  expect_error([&] { tok.token_bytes(266); }, "token id 266");
  const std::vector<int32_t> negative{-3};
  expect_error([&] { tok.decode(negative); }, "token id -3");
}

TEST(GPT2Tokenizer, FromPretrainedReadsAHuggingFaceFolder) {
  // GPT-2's own folder layout: vocab.json + merges.txt.
  GPT2Tokenizer gpt2 = GPT2Tokenizer::from_pretrained(std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/gpt2");
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  EXPECT_EQ(gpt2.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  // A folder with only tokenizer.json, as Hugging Face tokenizers saved it (merges as [a, b] pairs;
  // scripts/wordpiece_fixtures.cjs): the same tokenizer as its vocab.json + merges.txt.
  brisk::testing::TempDir tmp;
  const std::string hf_dir = std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/bpe_hf/";
  const std::string json_only = tmp.file("json_only");
  std::filesystem::create_directories(json_only);
  std::filesystem::copy_file(
      std::string(BRISK_SOURCE_DIR) + "/tests/data/fixtures/bpe_hf_tokenizer_json/tokenizer.json",
      json_only + "/tokenizer.json");
  GPT2Tokenizer from_json = GPT2Tokenizer::from_pretrained(json_only);
  GPT2Tokenizer from_files = GPT2Tokenizer::from_files(hf_dir + "vocab.json", hf_dir + "merges.txt");
  EXPECT_EQ(from_json.vocab_size(), from_files.vocab_size());
  EXPECT_EQ(from_json.num_merges(), from_files.num_merges());
  EXPECT_EQ(from_json.eot_token(), from_files.eot_token());
  size_t merged = 0;
  EXPECT_GE(check_goldens(from_json, hf_dir + "goldens.json", &merged), 25u);
  EXPECT_GT(merged, 50u);
  // The same merges written as "a b" strings (older tokenizer.json files).
  json::Value j = json::parse(brisk::testing::read_file(json_only + "/tokenizer.json"));
  json::Value strings = json::Value::array();
  for (const json::Value& m : j.at("model").at("merges").as_array())
    strings.push_back(json::Value(m[0].as_string() + " " + m[1].as_string()));
  j["model"].set("merges", strings);
  brisk::testing::write_file(json_only + "/tokenizer.json", j.dump());
  EXPECT_EQ(GPT2Tokenizer::from_pretrained(json_only).encode("Hello world, again!"),
            from_files.encode("Hello world, again!"));
}

TEST(GPT2Tokenizer, FromPretrainedSaysWhatTheFolderLacks) {
  brisk::testing::TempDir tmp;
  expect_error([&] { GPT2Tokenizer::from_pretrained(tmp.file("nowhere")); }, "is not a folder");
  std::filesystem::create_directories(tmp.file("half"));
  brisk::testing::write_file(tmp.file("half") + "/vocab.json", "{}");
  expect_error([&] { GPT2Tokenizer::from_pretrained(tmp.file("half")); }, "has vocab.json but no merges.txt");
  std::filesystem::create_directories(tmp.file("bert"));
  brisk::testing::write_file(tmp.file("bert") + "/vocab.txt", "[UNK]\n");
  expect_error([&] { GPT2Tokenizer::from_pretrained(tmp.file("bert")); }, "BertTokenizer::from_pretrained reads it");
  brisk::testing::write_file(tmp.file("bert") + "/tokenizer.json",
                             R"({"model": {"type": "WordPiece", "vocab": {}}, "pre_tokenizer": null})");
  expect_error([&] { GPT2Tokenizer::from_pretrained(tmp.file("bert")); }, "model.type WordPiece is not BPE");
  brisk::testing::write_file(tmp.file("bert") + "/tokenizer.json", "{\"model\": [");
  expect_error([&] { GPT2Tokenizer::from_pretrained(tmp.file("bert")); }, "is not valid JSON");
}
