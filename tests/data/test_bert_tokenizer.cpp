// BertTokenizer on vocabularies written here: WordPiece's greedy longest match, the word length
// limit, the normalizer's steps, special tokens in the text, truncation and padding rules, tensors,
// decoding, save_pretrained round trips, and the errors for bad files and arguments.
#include <gtest/gtest.h>

#include <brisk/data/bert_tokenizer.h>
#include <brisk/util/json.h>

#include <filesystem>
#include <random>

#include "common/errors.h"
#include "data/temp_dir.h"

using namespace brisk;
using brisk::testing::expect_error;
using data::BertTokenizer;
using data::Encoding;
using data::Padding;
using data::Truncation;

namespace {

std::vector<std::string> small_vocab() {
  return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un",    "##aff", "##able", "##a", "aff", "able",
          "the",   "cat",   "sat",   ",",     ".",      "!",     "a",     "##b",    "##c", "b",   "c",
          "cafe",  "##s",   "naive", "中",    "文",     "hello", "world", "'",      "s",   "it"};
}

BertTokenizer small(const data::BertTokenizerOptions& options = {}) {
  return BertTokenizer::from_vocab(small_vocab(), options, "small");
}

std::vector<std::string> tokens(const BertTokenizer& tok, std::string_view text) {
  return tok.tokenize(text);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

TEST(BertTokenizer, WordPieceTakesTheLongestPrefixThenTheLongestContinuations) {
  BertTokenizer tok = small();
  EXPECT_EQ(join(tokens(tok, "unaffable")), "un ##aff ##able");
  EXPECT_EQ(join(tokens(tok, "affable")), "aff ##able");
  EXPECT_EQ(join(tokens(tok, "abc")), "a ##b ##c");
  // One piece missing anywhere makes the whole word [UNK], not a partial split.
  EXPECT_EQ(join(tokens(tok, "unaffablez cat")), "[UNK] cat");
  EXPECT_EQ(join(tokens(tok, "cats")), "cat ##s");
}

TEST(BertTokenizer, WordsLongerThanTheLimitAreOneUnknownToken) {
  data::BertTokenizerOptions o;
  o.max_input_chars_per_word = 5;
  BertTokenizer tok = small(o);
  EXPECT_EQ(join(tokens(tok, "abcbc")), "a ##b ##c ##b ##c");  // 5 characters: split
  EXPECT_EQ(join(tokens(tok, "abcbcb")), "[UNK]");             // 6: one [UNK]
  // The limit counts characters after normalization, not bytes: 5 two-byte letters still split.
  EXPECT_EQ(join(tokens(tok,
                        "\xC3\xA1"
                        "bcbc")),
            "a ##b ##c ##b ##c");
}

TEST(BertTokenizer, UncasedNormalizationLowerCasesStripsAccentsAndSplitsPunctuationAndCJK) {
  BertTokenizer tok = small();
  EXPECT_EQ(tok.normalize("Caf\xC3\xA9 NA\xC3\x8FVE"), "cafe naive");
  EXPECT_EQ(join(tokens(tok, "Caf\xC3\xA9s, NA\xC3\x8FVE!")), "cafe ##s , naive !");
  EXPECT_EQ(join(tokens(tok,
                        "\xE4\xB8\xAD\xE6\x96\x87"
                        "cat")),
            "中 文 cat");  // 中文 spaced out
  // Combining marks written separately are stripped too (e + U+0301).
  EXPECT_EQ(tok.normalize("cafe\xCC\x81"), "cafe");
  // Control characters vanish, white space of any kind becomes a space.
  EXPECT_EQ(tok.normalize("a\x01"
                          "b\tc\xC2\xA0"
                          "d\xE2\x80\x8B"
                          "e"),
            "ab c de");
  // U+0130 lower-cases to i + U+0307, whose mark accent stripping removes: "istanbul".
  EXPECT_EQ(tok.normalize("\xC4\xB0STANBUL"), "istanbul");
  // Hangul syllables decompose into their jamo (NFD), as BERT's uncased models see them.
  EXPECT_EQ(tok.normalize("\xED\x95\x9C"), "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB");
  EXPECT_EQ(tok.pre_tokenize("it's (a)"), (std::vector<std::string>{"it", "'", "s", "(", "a", ")"}));
}

TEST(BertTokenizer, CasedNormalizationKeepsCaseAndAccentsUnlessAsked) {
  data::BertTokenizerOptions o;
  o.normalization.lowercase = false;
  EXPECT_EQ(small(o).normalize("Caf\xC3\xA9"), "Caf\xC3\xA9");
  o.normalization.strip_accents = true;
  EXPECT_EQ(small(o).normalize("Caf\xC3\xA9"), "Cafe");
  o.normalization = {.clean_text = false, .handle_chinese_chars = false, .strip_accents = false, .lowercase = true};
  EXPECT_EQ(small(o).normalize("A\x01\xE4\xB8\xAD"
                               "B"),
            "a\x01\xE4\xB8\xAD"
            "b");
}

TEST(BertTokenizer, SpecialTokensWrittenInTheTextAreThemselves) {
  BertTokenizer tok = small();
  EXPECT_EQ(join(tokens(tok, "the [MASK] sat[SEP]cat")), "the [MASK] sat [SEP] cat");
  // Only the exact spelling: lower-case "[mask]" is text (split at its brackets).
  EXPECT_EQ(join(tokens(tok, "[mask]")), "[UNK] [UNK] [UNK]");
}

TEST(BertTokenizer, SingleAndPairEncodingsHaveTemplateTypeIdsAndMasks) {
  BertTokenizer tok = small();
  Encoding e = tok.encode_plus("the cat");
  EXPECT_EQ(e.input_ids, (std::vector<int32_t>{2, 11, 12, 3}));
  EXPECT_EQ(e.token_type_ids, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(e.attention_mask, (std::vector<int32_t>{1, 1, 1, 1}));
  EXPECT_EQ(e.special_tokens_mask, (std::vector<int32_t>{1, 0, 0, 1}));
  Encoding p = tok.encode_pair("the cat", "sat .");
  EXPECT_EQ(p.input_ids, (std::vector<int32_t>{2, 11, 12, 3, 13, 15, 3}));
  EXPECT_EQ(p.token_type_ids, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1}));
  Encoding bare = tok.encode_pair("the cat", "sat", {.add_special_tokens = false});
  EXPECT_EQ(bare.input_ids, (std::vector<int32_t>{11, 12, 13}));
  EXPECT_EQ(bare.token_type_ids, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(tok.encode("the cat"), (std::vector<int32_t>{11, 12}));  // Tokenizer::encode: no specials
  EXPECT_EQ(tok.num_special_tokens_to_add(false), 2);
  EXPECT_EQ(tok.num_special_tokens_to_add(true), 3);
}

TEST(BertTokenizer, TruncationCountsSpecialTokensAndFollowsEachStrategy) {
  BertTokenizer tok = small();
  const std::string a = "a b c a b c", b = "the cat";  // 6 and 2 tokens
  auto lengths = [&](Truncation t, int64_t max) {
    Encoding e = tok.encode_pair(a, b, {.truncation = t, .max_length = max});
    int64_t n0 = 0, n1 = 0;
    for (size_t i = 0; i < e.size(); ++i) (e.token_type_ids[i] ? n1 : n0) += e.special_tokens_mask[i] ? 0 : 1;
    EXPECT_LE(static_cast<int64_t>(e.size()), max);
    return std::pair<int64_t, int64_t>{n0, n1};
  };
  EXPECT_EQ(lengths(Truncation::LongestFirst, 8), (std::pair<int64_t, int64_t>{3, 2}));  // the longer one is cut
  EXPECT_EQ(lengths(Truncation::LongestFirst, 6),
            (std::pair<int64_t, int64_t>{2, 1}));  // both: half each, odd to the longer
  EXPECT_EQ(lengths(Truncation::OnlyFirst, 7), (std::pair<int64_t, int64_t>{2, 2}));
  EXPECT_EQ(lengths(Truncation::LongestFirst, 3), (std::pair<int64_t, int64_t>{0, 0}));  // only [CLS] [SEP] [SEP]
  expect_error([&] { tok.encode_pair(a, b, {.truncation = Truncation::OnlySecond, .max_length = 7}); }, "second text");
  expect_error([&] { tok.encode_pair(a, b, {.truncation = Truncation::LongestFirst, .max_length = 2}); },
               "less than the 3 special tokens");
  expect_error([&] { tok.encode_plus(a, {.truncation = Truncation::OnlySecond, .max_length = 5}); },
               "needs a second text");
  // max_length 0 means the tokenizer's model_max_length, which this one does not have.
  expect_error([&] { tok.encode_plus(a, {.truncation = Truncation::LongestFirst}); }, "model_max_length");
  data::BertTokenizerOptions o;
  o.model_max_length = 4;
  EXPECT_EQ(small(o).encode_plus(a, {.truncation = Truncation::LongestFirst}).size(), 4u);
  EXPECT_EQ(tok.encode_plus(a, {.truncation = Truncation::None, .max_length = 3}).size(), 8u);
}

TEST(BertTokenizer, PaddingGoesToTheLongestOrToMaxLengthWithPadTokens) {
  BertTokenizer tok = small();
  std::vector<std::string> texts = {"the cat sat", "a", ""};
  std::vector<Encoding> batch = tok.encode_batch(texts, {.padding = Padding::Longest});
  ASSERT_EQ(batch.size(), 3u);
  for (const Encoding& e : batch) ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(batch[1].input_ids, (std::vector<int32_t>{2, 17, 3, 0, 0}));
  EXPECT_EQ(batch[1].attention_mask, (std::vector<int32_t>{1, 1, 1, 0, 0}));
  EXPECT_EQ(batch[1].special_tokens_mask, (std::vector<int32_t>{1, 0, 1, 1, 1}));
  EXPECT_EQ(tok.encode_batch(texts, {.padding = Padding::Longest, .pad_to_multiple_of = 4})[0].size(), 8u);
  EXPECT_EQ(tok.encode_plus("a", {.padding = Padding::MaxLength, .max_length = 6}).size(), 6u);
  // Padding never cuts: a longer text stays longer without truncation.
  EXPECT_EQ(tok.encode_plus("the cat sat", {.padding = Padding::MaxLength, .max_length = 2}).size(), 5u);
  // A vocabulary without [PAD] cannot pad.
  std::vector<std::string> v = small_vocab();
  v[0] = "[NOTPAD]";
  BertTokenizer no_pad = BertTokenizer::from_vocab(v, {}, "nopad");
  EXPECT_EQ(no_pad.pad_token_id(), -1);
  expect_error([&] { no_pad.encode_batch(texts, {.padding = Padding::Longest}); }, "[PAD]");
}

TEST(BertTokenizer, BatchTensorsAreInt64RowsOfTheEncodings) {
  BertTokenizer tok = small();
  std::vector<std::string> a = {"the cat", "a"}, b = {"sat", "b c"};
  data::BatchEncoding t = tok.encode_batch_tensors(a, b, {.padding = Padding::Longest});
  std::vector<Encoding> e = tok.encode_batch(a, b, {.padding = Padding::Longest});
  ASSERT_EQ(t.input_ids.sizes(), (Shape{2, 6}));
  EXPECT_EQ(t.input_ids.dtype(), DType::I64);
  EXPECT_EQ(t.attention_mask.dtype(), DType::I64);
  const std::vector<int64_t> ids = t.input_ids.to_vector<int64_t>(), types = t.token_type_ids.to_vector<int64_t>(),
                             mask = t.attention_mask.to_vector<int64_t>();
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 6; ++j) {
      EXPECT_EQ(ids[i * 6 + j], e[i].input_ids[j]);
      EXPECT_EQ(types[i * 6 + j], e[i].token_type_ids[j]);
      EXPECT_EQ(mask[i * 6 + j], e[i].attention_mask[j]);
    }
  expect_error([&] { tok.encode_batch_tensors(a); }, "pad");
  expect_error([&] { tok.encode_batch(a, std::vector<std::string>{"x"}); }, "2 texts but 1 second texts");
}

TEST(BertTokenizer, DecodeJoinsPiecesAndCleansUpSpaces) {
  BertTokenizer tok = small();
  Encoding e = tok.encode_plus("Unaffable cat, it's a cat!");
  EXPECT_EQ(tok.decode(e.input_ids), "[CLS] unaffable cat, it's a cat! [SEP]");
  EXPECT_EQ(tok.decode(e.input_ids, {.skip_special_tokens = true}), "unaffable cat, it's a cat!");
  EXPECT_EQ(tok.decode(e.input_ids, {.skip_special_tokens = true, .clean_up_tokenization_spaces = false}),
            "unaffable cat, it ' s a cat!");  // the WordPiece decoder's own clean-up still joins " ,", " !"
  const std::vector<int32_t> bad = {2, 99};
  expect_error([&] { tok.decode(bad); }, "token id 99 at position 1");
  EXPECT_EQ(tok.id_to_token(6), "##aff");
  EXPECT_EQ(tok.token_to_id("##aff"), 6);
  EXPECT_EQ(tok.token_to_id("nope"), -1);
  EXPECT_TRUE(tok.is_special_token(tok.cls_token_id()));
  EXPECT_FALSE(tok.is_special_token(11));
  EXPECT_EQ(tok.name(), "bert-wordpiece(32, uncased)");
}

TEST(BertTokenizer, InvalidUtf8BytesAreDroppedLikeReplacementCharacters) {
  BertTokenizer tok = small();
  EXPECT_EQ(join(tokens(tok,
                        "\xFF"
                        "the cat\xC3")),
            "the cat");  // no [UNK]: cleaned away
  EXPECT_EQ(tok.normalize("a\xFF"
                          "b"),
            "ab");
}

TEST(BertTokenizer, SavePretrainedRoundTripsThroughBothFileForms) {
  brisk::testing::TempDir tmp;
  data::BertTokenizerOptions o;
  o.model_max_length = 64;
  o.normalization.lowercase = false;
  BertTokenizer tok = small(o);
  tok.save_pretrained(tmp.file("saved"));
  for (const char* f : {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    EXPECT_TRUE(std::filesystem::exists(tmp.file("saved") + "/" + f)) << f;
  BertTokenizer back = BertTokenizer::from_pretrained(tmp.file("saved"));
  EXPECT_EQ(back.model_max_length(), 64);
  EXPECT_FALSE(back.normalization().lowercase);
  // vocab.txt + tokenizer_config.json alone read back the same.
  std::filesystem::remove(tmp.file("saved") + "/tokenizer.json");
  BertTokenizer from_txt = BertTokenizer::from_pretrained(tmp.file("saved"));
  const std::string text = "Unaffable CAT [MASK], caf\xC3\xA9 中文!";
  for (const BertTokenizer* t : {&back, &from_txt}) {
    EXPECT_EQ(t->encode_pair(text, "the cat").input_ids, tok.encode_pair(text, "the cat").input_ids);
    EXPECT_EQ(t->vocab_size(), tok.vocab_size());
  }
  // Saving what was loaded writes the same bytes.
  back.save_pretrained(tmp.file("again"));
  tok.save_pretrained(tmp.file("again2"));
  for (const char* f : {"vocab.txt", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(brisk::testing::read_file(tmp.file("again") + "/" + f),
              brisk::testing::read_file(tmp.file("again2") + "/" + f))
        << f;
}

TEST(BertTokenizer, BadVocabularyFilesNameTheFileAndTheValue) {
  brisk::testing::TempDir tmp;
  expect_error([&] { BertTokenizer::from_vocab_file(tmp.file("missing.txt")); }, "missing.txt");
  brisk::testing::write_file(tmp.file("dup.txt"), "[UNK]\n[CLS]\n[SEP]\nthe\ncat\nthe\n");
  expect_error([&] { BertTokenizer::from_vocab_file(tmp.file("dup.txt")); },
               "token \"the\" appears twice, as id 3 (line 4) and id 5");
  brisk::testing::write_file(tmp.file("nounk.txt"), "[CLS]\n[SEP]\nthe\n");
  expect_error([&] { BertTokenizer::from_vocab_file(tmp.file("nounk.txt")); }, "no unknown token \"[UNK]\"");
  brisk::testing::write_file(tmp.file("nocls.txt"), "[UNK]\n[SEP]\nthe\n");
  expect_error([&] { BertTokenizer::from_vocab_file(tmp.file("nocls.txt")); }, "has no \"[CLS]\" token");
  brisk::testing::write_file(tmp.file("latin1.txt"), "[UNK]\n[CLS]\n[SEP]\ncaf\xE9\n");
  expect_error([&] { BertTokenizer::from_vocab_file(tmp.file("latin1.txt")); }, "not UTF-8");
  expect_error([&] { BertTokenizer::from_vocab({}, {}, "empty"); }, "'empty' has no tokens");
}

TEST(BertTokenizer, BadTokenizerJsonNamesTheFileAndThePlace) {
  auto with = [](const std::string& edit) {
    json::Value j = json::parse(
        R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3}},
      "normalizer": {"type": "BertNormalizer", "lowercase": true}, "pre_tokenizer": {"type": "BertPreTokenizer"},
      "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]}, "decoder": null, "added_tokens": []})");
    json::Value e = json::parse(edit);
    for (const auto& [k, v] : e.items()) j.set(k, v);
    return j.dump();
  };
  EXPECT_EQ(BertTokenizer::from_tokenizer_json_string(with("{}"), {}, "t.json").encode_plus("A a").input_ids,
            (std::vector<int32_t>{1, 3, 3, 2}));
  expect_error([&] { BertTokenizer::from_tokenizer_json_string("{\"model\": ", {}, "t.json"); },
               "'t.json' is not valid JSON");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(with(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})"), {},
                                                  "t.json");
      },
      "GPT2Tokenizer::from_pretrained");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(
            with(R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 0}}})"), {},
            "t.json");
      },
      "model.vocab[\"a\"]: id 0 is also the id of \"[UNK]\"");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(
            with(R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 5}}})"), {},
            "t.json");
      },
      "model.vocab[\"a\"]: must be an integer in [0, 1]");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(
            with(
                R"({"model": {"type": "WordPiece", "unk_token": "[NOPE]", "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2}}})"),
            {}, "t.json");
      },
      "no unknown token \"[NOPE]\"");
  expect_error(
      [&] { BertTokenizer::from_tokenizer_json_string(with(R"({"normalizer": {"type": "NFKC"}})"), {}, "t.json"); },
      "normalizer.type: \"NFKC\" is not supported");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(with(R"({"pre_tokenizer": {"type": "Whitespace"}})"), {}, "t.json");
      },
      "BertPreTokenizer");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(
            with(R"({"normalizer": {"type": "BertNormalizer", "lowercase": "yes"}})"), {}, "t.json");
      },
      "normalizer.lowercase: must be true or false, not \"yes\"");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(with(R"({"added_tokens": [{"id": 3, "content": "[MASK]"}]})"), {},
                                                  "t.json");
      },
      "\"[MASK]\" has id 3, which is \"a\" in model.vocab");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(
            with(R"({"added_tokens": [{"id": 4, "content": "<x>", "lstrip": true}]})"), {}, "t.json");
      },
      "lstrip true");
  expect_error(
      [&] {
        BertTokenizer::from_tokenizer_json_string(with(R"({"post_processor": {"type": "RobertaProcessing"}})"), {},
                                                  "t.json");
      },
      "TemplateProcessing, BertProcessing");
  // An added token past the vocabulary takes the next id and is found in the text.
  BertTokenizer extra = BertTokenizer::from_tokenizer_json_string(
      with(R"({"added_tokens": [{"id": 4, "content": "<x>", "special": false, "normalized": false}]})"), {}, "t.json");
  EXPECT_EQ(extra.vocab_size(), 5);
  EXPECT_EQ(extra.encode("a<x>a"), (std::vector<int32_t>{3, 4, 3}));
}

TEST(BertTokenizer, FromPretrainedSaysWhatTheFolderLacks) {
  brisk::testing::TempDir tmp;
  expect_error([&] { BertTokenizer::from_pretrained(tmp.file("nowhere")); }, "is not a folder");
  std::filesystem::create_directories(tmp.file("gpt2"));
  brisk::testing::write_file(tmp.file("gpt2") + "/vocab.json", "{}");
  expect_error([&] { BertTokenizer::from_pretrained(tmp.file("gpt2")); }, "GPT2Tokenizer::from_pretrained reads them");
  std::filesystem::create_directories(tmp.file("bad_config"));
  brisk::testing::write_file(tmp.file("bad_config") + "/vocab.txt", "[UNK]\n[CLS]\n[SEP]\n");
  brisk::testing::write_file(tmp.file("bad_config") + "/tokenizer_config.json", R"({"do_lower_case": "no"})");
  expect_error([&] { BertTokenizer::from_pretrained(tmp.file("bad_config")); },
               "\"do_lower_case\" must be true or false, not \"no\"");
  brisk::testing::write_file(tmp.file("bad_config") + "/tokenizer_config.json", R"({"model_max_length": -3})");
  expect_error([&] { BertTokenizer::from_pretrained(tmp.file("bad_config")); },
               "\"model_max_length\" must be a positive number");
  // transformers' "no limit" (1e30) is no limit; special token names may be AddedToken objects.
  brisk::testing::write_file(
      tmp.file("bad_config") + "/tokenizer_config.json",
      R"({"model_max_length": 1e30, "do_lower_case": false, "unk_token": {"content": "[UNK]", "__type": "AddedToken"}})");
  BertTokenizer ok = BertTokenizer::from_pretrained(tmp.file("bad_config"));
  EXPECT_EQ(ok.model_max_length(), 0);
  EXPECT_FALSE(ok.normalization().lowercase);
}

TEST(BertTokenizer, OptionNamesParseAsTransformersSpellsThem) {
  EXPECT_EQ(data::parse_truncation("longest_first"), Truncation::LongestFirst);
  EXPECT_EQ(data::parse_truncation("only_second"), Truncation::OnlySecond);
  EXPECT_EQ(data::parse_padding("max_length"), Padding::MaxLength);
  expect_error([] { data::parse_truncation("longest"); }, "longest_first, only_first, only_second, do_not_truncate");
  expect_error([] { data::parse_padding("max"); }, "longest, max_length, do_not_pad");
  EXPECT_STREQ(BertTokenizer::unicode_version(), "14.0.0");
}

TEST(BertTokenizer, RandomBytesKeepEveryEncodingInvariant) {
  // Random bytes (invalid UTF-8, controls, multi-byte characters, special tokens) under random
  // options: ids in range, the four vectors of one length, truncation within max_length and the
  // template intact, token types 0 then 1, padding at the end; decode never throws.
  BertTokenizer tok = small();
  std::mt19937 rng(1234);
  const std::vector<std::string> atoms = {
      "a",      "b",     "c", " ", "un", "aff",  "able", "\xC3\xA9",         "\xE4\xB8\xAD",
      "[MASK]", "[SEP]", ",", "!", "\t", "\x01", "\xFF", "\xF0\x9F\x98\x80", "\xCC\x81",
      "cat"};
  auto random_text = [&] {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 8 == 0) {
        s.push_back(static_cast<char>(rng() % 256));
      } else {
        s += atoms[rng() % atoms.size()];
      }
    }
    return s;
  };
  for (int iter = 0; iter < 3000; ++iter) {
    const std::string a = random_text(), b = random_text();
    const bool pair = rng() % 2 == 0;
    data::EncodeOptions o;
    o.truncation = static_cast<Truncation>(rng() % 3);  // None, LongestFirst, OnlyFirst
    o.max_length = 3 + static_cast<int64_t>(rng() % 20);
    o.padding = static_cast<Padding>(rng() % 3);
    o.pad_to_multiple_of = rng() % 2 ? 0 : 4;
    Encoding e;
    try {
      e = pair ? tok.encode_pair(a, b, o) : tok.encode_plus(a, o);
    } catch (const Error&) {
      ASSERT_EQ(o.truncation, Truncation::OnlyFirst);  // the first text too short to cut: the only error
      continue;
    }
    ASSERT_EQ(e.token_type_ids.size(), e.size());
    ASSERT_EQ(e.attention_mask.size(), e.size());
    ASSERT_EQ(e.special_tokens_mask.size(), e.size());
    const size_t real = static_cast<size_t>(std::count(e.attention_mask.begin(), e.attention_mask.end(), 1));
    if (o.truncation != Truncation::None) {
      ASSERT_LE(static_cast<int64_t>(real), o.max_length);
    }
    ASSERT_GE(real, pair ? 3u : 2u);
    ASSERT_EQ(e.input_ids[0], tok.cls_token_id());
    ASSERT_EQ(e.input_ids[real - 1], tok.sep_token_id());
    for (size_t i = 0; i < e.size(); ++i) {
      ASSERT_GE(e.input_ids[i], 0);
      ASSERT_LT(e.input_ids[i], tok.vocab_size());
      if (i >= real) {
        ASSERT_EQ(e.input_ids[i], tok.pad_token_id());
      } else if (i > 0) {
        ASSERT_GE(e.token_type_ids[i], e.token_type_ids[i - 1]);
      }
    }
    if (o.padding == Padding::MaxLength) {
      ASSERT_GE(static_cast<int64_t>(e.size()), o.max_length);
    }
    // (MaxLength without truncation leaves a longer text as it is, unrounded, as tokenizers does.)
    if (o.pad_to_multiple_of == 4 &&
        (o.padding == Padding::Longest || (o.padding == Padding::MaxLength && o.truncation != Truncation::None))) {
      ASSERT_EQ(e.size() % 4, 0u);
    }
    (void)tok.decode(e.input_ids);
    (void)tok.decode(e.input_ids, {.skip_special_tokens = true});
  }
}
