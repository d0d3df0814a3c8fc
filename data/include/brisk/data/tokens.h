// Token data for language models: the Tokenizer interface and its byte-level implementation,
// llm.c's .bin token files, text corpora (by default Debian's `fortunes`), the train/validation
// split, and a dataset of (x, y) windows for the DataLoader.
//
//   data::ByteTokenizer tok;
//   auto tokens = tok.encode(data::read_text_corpus(""));          // the fortunes, as bytes
//   auto [train, val] = data::split_tokens(tokens, 0.1);           // the last 10% validate
//   auto windows = std::make_shared<data::TokenWindows>(train, 64, 1);  // every offset
//   data::DataLoader loader(windows, {.batch_size = 8, .shuffle = true, .seed = 0});
//   for (auto& [x, y] : loader) { ... }                            // x, y (8, 64) int64, y = x shifted by one
//
// The format of the .bin files (docs/gpt2.md): a header of 256 little-endian int32 (magic
// 20240520, version 1, the token count, then zeros), then the tokens as little-endian uint16.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brisk/data/dataset.h"

namespace brisk::data {

// Text <-> token ids.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside [0, vocab_size()) throw brisk::Error naming the id and its position.
  virtual std::string decode(std::span<const int32_t> tokens) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string name() const = 0;
};

// One token per byte (vocabulary 256): any text round-trips exactly.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> tokens) const override;
  int64_t vocab_size() const override { return 256; }
  std::string name() const override { return "byte"; }
};

// --- llm.c's token files ---------------------------------------------------------------------
constexpr int32_t kTokenFileMagic = 20240520;
constexpr int32_t kTokenFileVersion = 1;
constexpr int64_t kTokenFileHeaderInts = 256;

// The tokens of a .bin file's bytes; `name` (the file) is in every error: a short header, a bad
// magic or version, a negative count, or fewer (or more) token bytes than the header's count.
std::vector<int32_t> parse_token_file(std::string_view bytes, const std::string& name);
// Reads a .bin file (errors name the path).
std::vector<int32_t> read_token_file(const std::string& path);
// The bytes of a .bin file holding `tokens`; a token outside [0, 65535] throws naming it.
std::string token_file_bytes(std::span<const int32_t> tokens, const std::string& name = "<memory>");
// Writes token_file_bytes(tokens) to `path` atomically.
void write_token_file(const std::string& path, std::span<const int32_t> tokens);

// --- text corpora ----------------------------------------------------------------------------
// Where Debian's `fortunes` package puts its text (apt-get install fortunes).
constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
// The text of `path`: a file's bytes, or for a folder its plain-text files (those without an
// extension: the fortunes' .dat files are binary indexes, .u8 are links) in name order, joined.
// Empty path: kFortunesDir. A missing path, or a folder without such files, throws naming it and
// (for the default) the package to install.
std::string read_text_corpus(const std::string& path = "");

struct TokenSplit {
  std::vector<int32_t> train, val;
};
// The first (1 - val_fraction) of the tokens train, the rest validate. val_fraction in [0, 1).
TokenSplit split_tokens(std::span<const int32_t> tokens, double val_fraction = 0.1);

// The entropy in nats of the byte unigram distribution of `tokens` (ids in [0, vocab_size)):
// the loss of a model that learned the token frequencies and nothing else.
double unigram_entropy(std::span<const int32_t> tokens, int64_t vocab_size);

// Windows of block_size + 1 tokens: example i starts at token i * stride; data = its first
// block_size tokens, target = its last block_size (the next token of each), both int64 (block_size).
// stride 1 with a shuffling DataLoader samples random offsets (seeded, and sharded across processes
// by the Accelerator like any dataset); stride block_size gives the sequential, non-overlapping
// windows of a validation pass. Needs at least block_size + 1 tokens.
class TokenWindows : public Dataset {
 public:
  TokenWindows(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block_size, int64_t stride);
  TokenWindows(std::vector<int32_t> tokens, int64_t block_size, int64_t stride)
      : TokenWindows(std::make_shared<const std::vector<int32_t>>(std::move(tokens)), block_size, stride) {}
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  int64_t block_size() const { return block_size_; }
  int64_t stride() const { return stride_; }
  const std::vector<int32_t>& tokens() const { return *tokens_; }

 private:
  std::shared_ptr<const std::vector<int32_t>> tokens_;
  int64_t block_size_, stride_, size_;
};

}  // namespace brisk::data
