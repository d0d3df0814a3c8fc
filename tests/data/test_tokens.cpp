// Token data: the byte tokenizer, llm.c .bin files (round trip and every corrupt header), text
// corpora, the train/validation split, the unigram entropy and the (x, y) windows.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "common/errors.h"
#include "data/temp_dir.h"

using namespace brisk;
using brisk::testing::error_of;
using brisk::testing::TempDir;

namespace {

// A .bin file's bytes: header fields as given, then the tokens as uint16 little-endian.
std::string bin_bytes(int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& tokens) {
  std::string s(size_t{256} * 4, '\0');
  auto put = [&](size_t at, int32_t v) {
    for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((static_cast<uint32_t>(v) >> (8 * i)) & 0xff);
  };
  put(0, magic);
  put(4, version);
  put(8, count);
  for (uint16_t t : tokens) {
    s.push_back(static_cast<char>(t & 0xff));
    s.push_back(static_cast<char>(t >> 8));
  }
  return s;
}

std::vector<int64_t> values(const Tensor& t) {
  Tensor c = contiguous(t.to(DType::I64));
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}

}  // namespace

TEST(ByteTokenizer, RoundTripsAnyBytes) {
  data::ByteTokenizer tok;
  std::string text = "Hello, w\xc3\xb6rld!\n";
  text.push_back('\0');
  text.push_back('\xff');
  std::vector<int32_t> ids = tok.encode(text);
  ASSERT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[0], 'H');
  EXPECT_EQ(ids.back(), 255);
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_EQ(tok.name(), "byte");
  const data::Tokenizer& base = tok;  // usable through the interface
  EXPECT_EQ(base.encode("ab"), (std::vector<int32_t>{97, 98}));
  std::vector<int32_t> bad{65, 256};
  EXPECT_NE(error_of([&] { tok.decode(bad); }).find("token 256 at position 1"), std::string::npos);
}

TEST(TokenFile, RoundTripsAndMatchesLlmCsLayout) {
  TempDir dir;
  const std::string path = dir.file("train.bin");
  std::vector<int32_t> tokens{0, 1, 50256, 65535, 300, 7};
  data::write_token_file(path, tokens);
  const std::string bytes = brisk::testing::read_file(path);
  // llm.c: 256 int32 header (magic, version, count), then uint16 tokens.
  EXPECT_EQ(bytes, bin_bytes(20240520, 1, 6, {0, 1, 50256, 65535, 300, 7}));
  EXPECT_EQ(data::token_file_bytes(tokens), bytes);
  EXPECT_EQ(data::parse_token_file(bytes, "x"), tokens);
  EXPECT_EQ(data::read_token_file(path), tokens);
  // Empty files are valid.
  data::write_token_file(dir.file("empty.bin"), {});
  EXPECT_TRUE(data::read_token_file(dir.file("empty.bin")).empty());
  // A token that does not fit uint16 is refused, naming it; the file is not written.
  std::vector<int32_t> big{1, 65536};
  EXPECT_NE(error_of([&] { data::write_token_file(dir.file("big.bin"), big); }).find("token 65536 at position 1"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("big.bin")));
}

TEST(TokenFile, CorruptHeadersAreErrorsNamingTheFile) {
  TempDir dir;
  auto check = [&](const std::string& bytes, const std::string& want) {
    const std::string path = dir.file("bad.bin");
    brisk::testing::write_file(path, bytes);
    const std::string msg = error_of([&] { data::read_token_file(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  };
  check(std::string(100, '\0'), "shorter than the header");
  check(bin_bytes(20240521, 1, 2, {1, 2}), "bad magic 20240521");
  check(bin_bytes(20240520, 2, 2, {1, 2}), "unsupported version 2");
  check(bin_bytes(20240520, 1, -1, {}), "negative token count");
  check(bin_bytes(20240520, 1, 3, {1, 2}), "truncated");
  check(bin_bytes(20240520, 1, 1, {1, 2}), "says 1 tokens");
  std::string odd = bin_bytes(20240520, 1, 1, {1});
  odd.push_back('x');
  check(odd, "3 bytes follow");
  EXPECT_NE(error_of([&] { data::read_token_file(dir.file("missing.bin")); }).find("missing.bin"), std::string::npos);
}

TEST(TextCorpus, ReadsAFileOrTheExtensionlessFilesOfAFolder) {
  TempDir dir;
  brisk::testing::write_file(dir.file("b"), "second\n");
  brisk::testing::write_file(dir.file("a"), "first\n");
  brisk::testing::write_file(dir.file("a.dat"), std::string("\x01\x02", 2));
  EXPECT_EQ(data::read_text_corpus(dir.path()), "first\nsecond\n");
  EXPECT_EQ(data::read_text_corpus(dir.file("b")), "second\n");
  EXPECT_NE(error_of([&] { data::read_text_corpus(dir.file("nope")); }).find("nope"), std::string::npos);
  TempDir empty;
  brisk::testing::write_file(empty.file("x.dat"), "x");
  EXPECT_NE(error_of([&] { data::read_text_corpus(empty.path()); }).find("no plain-text files"), std::string::npos);
}

TEST(TextCorpus, TheDefaultIsTheFortunes) {
  if (!std::filesystem::exists(data::kFortunesDir)) GTEST_SKIP() << "fortunes is not installed";
  const std::string text = data::read_text_corpus("");
  EXPECT_GT(text.size(), 100000u);
  EXPECT_NE(text.find("\n%\n"), std::string::npos);  // the fortunes' separator
}

TEST(TokenSplit, TheLastFractionValidates) {
  std::vector<int32_t> t(100);
  for (int i = 0; i < 100; ++i) t[i] = i;
  auto [train, val] = data::split_tokens(t, 0.1);
  ASSERT_EQ(train.size(), 90u);
  ASSERT_EQ(val.size(), 10u);
  EXPECT_EQ(train.back(), 89);
  EXPECT_EQ(val.front(), 90);
  EXPECT_THROW(data::split_tokens(t, 1.0), Error);
  EXPECT_THROW(data::split_tokens(t, -0.1), Error);
}

TEST(UnigramEntropy, IsTheEntropyOfTheFrequencies) {
  EXPECT_NEAR(data::unigram_entropy(std::vector<int32_t>{1, 1, 1, 1}, 4), 0.0, 1e-12);
  EXPECT_NEAR(data::unigram_entropy(std::vector<int32_t>{0, 1, 2, 3}, 4), std::log(4.0), 1e-12);
  EXPECT_NEAR(data::unigram_entropy(std::vector<int32_t>{0, 0, 0, 1}, 2),
              -(0.75 * std::log(0.75) + 0.25 * std::log(0.25)), 1e-12);
  EXPECT_THROW(data::unigram_entropy(std::vector<int32_t>{5}, 4), Error);
}

TEST(TokenWindows, TargetsAreTheInputsShiftedByOne) {
  std::vector<int32_t> t(20);
  for (int i = 0; i < 20; ++i) t[i] = 100 + i;
  data::TokenWindows every(t, 4, 1);
  EXPECT_EQ(every.size(), 16);  // offsets 0 ... 15: the last window's target ends at token 19
  data::Example e = every.get(15);
  EXPECT_EQ(values(e.data), (std::vector<int64_t>{115, 116, 117, 118}));
  EXPECT_EQ(values(e.target), (std::vector<int64_t>{116, 117, 118, 119}));
  EXPECT_EQ(e.data.dtype(), DType::I64);
  EXPECT_THROW(every.get(16), Error);
  data::TokenWindows seq(t, 4, 4);
  EXPECT_EQ(seq.size(), 4);  // 0, 4, 8, 12 (16 would need token 20)
  data::Batch b = seq.get_batch({0, 3});
  EXPECT_EQ(b.data.sizes(), (Shape{2, 4}));
  EXPECT_EQ(values(b.data), (std::vector<int64_t>{100, 101, 102, 103, 112, 113, 114, 115}));
  EXPECT_THROW(data::TokenWindows(std::vector<int32_t>{1, 2, 3}, 4, 1), Error);
  EXPECT_THROW(data::TokenWindows(t, 0, 1), Error);
}

// Random offsets through a shuffling DataLoader: reproducible from the seed, and the per-rank
// shards of a DistributedSampler are disjoint and cover every offset.
TEST(TokenWindows, ShuffledOffsetsAreSeededAndShardable) {
  std::vector<int32_t> t(200);
  for (int i = 0; i < 200; ++i) t[i] = i % 256;
  auto ds = std::make_shared<data::TokenWindows>(t, 8, 1);
  auto first_batch = [&](uint64_t seed) {
    data::DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .seed = seed});
    for (auto& [x, y] : loader) return values(x);
    return std::vector<int64_t>();
  };
  EXPECT_EQ(first_batch(1), first_batch(1));
  EXPECT_NE(first_batch(1), first_batch(2));
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 2; ++r) {
    data::DistributedSampler s(ds->size(), 2, r, true, 3, true);
    for (int64_t i : s.indices(0)) EXPECT_TRUE(seen.insert(i).second) << "offset " << i << " twice";
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), ds->size() / 2 * 2);
}
