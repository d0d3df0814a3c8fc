// Tokenizers, llm.c token files, text corpora and token windows.
#include "brisk/data/tokens.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "read_file.h"

namespace brisk::data {

namespace {

int32_t read_le32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return static_cast<int32_t>(v);
}

void put_le32(std::string& out, int32_t value) {
  const auto v = static_cast<uint32_t>(value);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::string read_whole_file(const std::string& path, const char* who) {
  std::ifstream in(path, std::ios::binary);
  BRISK_CHECK(in.good(), who, ": cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  BRISK_CHECK(!in.bad(), who, ": cannot read '", path, "'");
  return std::move(ss).str();
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<uint8_t>(text[i]);
  return out;
}

std::string ByteTokenizer::decode(std::span<const int32_t> tokens) const {
  std::string out(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    BRISK_CHECK(tokens[i] >= 0 && tokens[i] < 256, "ByteTokenizer::decode: token ", tokens[i], " at position ", i,
                " is not a byte (vocabulary 256)");
    out[i] = static_cast<char>(tokens[i]);
  }
  return out;
}

std::vector<int32_t> parse_token_file(std::string_view bytes, const std::string& name) {
  constexpr size_t header_bytes = kTokenFileHeaderInts * 4;
  BRISK_CHECK(bytes.size() >= header_bytes, "token file '", name, "': ", bytes.size(),
              " bytes, shorter than the header of ", header_bytes, " bytes");
  const int32_t magic = read_le32(bytes.data()), version = read_le32(bytes.data() + 4),
                count = read_le32(bytes.data() + 8);
  BRISK_CHECK(magic == kTokenFileMagic, "token file '", name, "': bad magic ", magic, " (expected ", kTokenFileMagic,
              ", llm.c's token format)");
  BRISK_CHECK(version == kTokenFileVersion, "token file '", name, "': unsupported version ", version, " (expected ",
              kTokenFileVersion, ")");
  BRISK_CHECK(count >= 0, "token file '", name, "': negative token count ", count);
  const size_t body = bytes.size() - header_bytes, want = static_cast<size_t>(count) * 2;
  BRISK_CHECK(body == want, "token file '", name, "': the header says ", count, " tokens (", want, " bytes) but ", body,
              " bytes follow it", body < want ? " (truncated)" : "");
  std::vector<int32_t> out(static_cast<size_t>(count));
  const char* p = bytes.data() + header_bytes;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<int32_t>(static_cast<uint8_t>(p[2 * i]) | (static_cast<uint8_t>(p[2 * i + 1]) << 8));
  }
  return out;
}

std::vector<int32_t> read_token_file(const std::string& path) {
  return parse_token_file(read_whole_file(path, "read_token_file"), path);
}

std::string token_file_bytes(std::span<const int32_t> tokens, const std::string& name) {
  BRISK_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX), "token file '", name, "': ", tokens.size(),
              " tokens do not fit the header's int32 count");
  std::string out;
  out.reserve(kTokenFileHeaderInts * 4 + tokens.size() * 2);
  put_le32(out, kTokenFileMagic);
  put_le32(out, kTokenFileVersion);
  put_le32(out, static_cast<int32_t>(tokens.size()));
  out.resize(kTokenFileHeaderInts * 4, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    BRISK_CHECK(tokens[i] >= 0 && tokens[i] <= 65535, "token file '", name, "': token ", tokens[i], " at position ", i,
                " does not fit uint16");
    out.push_back(static_cast<char>(tokens[i] & 0xff));
    out.push_back(static_cast<char>((tokens[i] >> 8) & 0xff));
  }
  return out;
}

void write_token_file(const std::string& path, std::span<const int32_t> tokens) {
  io::write_file_atomic(path, token_file_bytes(tokens, path), "write_token_file");
}

std::string read_text_corpus(const std::string& path) {
  namespace fs = std::filesystem;
  const bool is_default = path.empty();
  const std::string p = is_default ? std::string(kFortunesDir) : path;
  std::error_code ec;
  BRISK_CHECK(
      fs::exists(p, ec), "read_text_corpus: '", p, "' does not exist",
      is_default ? " (the default corpus is Debian's fortunes: apt-get install fortunes, or give a text file)" : "");
  if (!fs::is_directory(p, ec)) return read_whole_file(p, "read_text_corpus");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(p)) {
    if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  BRISK_CHECK(!files.empty(), "read_text_corpus: the folder '", p, "' has no plain-text files (files without an ",
              "extension)");
  std::string text;
  for (const std::string& f : files) text += read_whole_file(f, "read_text_corpus");
  return text;
}

TokenSplit split_tokens(std::span<const int32_t> tokens, double val_fraction) {
  BRISK_CHECK(val_fraction >= 0.0 && val_fraction < 1.0, "split_tokens: val_fraction must be in [0, 1), got ",
              val_fraction);
  const auto n_val = static_cast<size_t>(std::floor(static_cast<double>(tokens.size()) * val_fraction));
  const size_t n_train = tokens.size() - n_val;
  return {std::vector<int32_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n_train)),
          std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(n_train), tokens.end())};
}

double unigram_entropy(std::span<const int32_t> tokens, int64_t vocab_size) {
  BRISK_CHECK(!tokens.empty(), "unigram_entropy: no tokens");
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    BRISK_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size, "unigram_entropy: token ", tokens[i], " at position ", i,
                " is outside [0, ", vocab_size, ")");
    ++counts[static_cast<size_t>(tokens[i])];
  }
  double h = 0;
  const auto n = static_cast<double>(tokens.size());
  for (int64_t c : counts) {
    if (c > 0) h -= static_cast<double>(c) / n * std::log(static_cast<double>(c) / n);
  }
  return h;
}

TokenWindows::TokenWindows(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block_size, int64_t stride)
    : tokens_(std::move(tokens)), block_size_(block_size), stride_(stride) {
  BRISK_CHECK(tokens_ != nullptr, "TokenWindows: no tokens");
  BRISK_CHECK(block_size >= 1 && stride >= 1, "TokenWindows: block_size (", block_size, ") and stride (", stride,
              ") must be positive");
  const auto n = static_cast<int64_t>(tokens_->size());
  BRISK_CHECK(n >= block_size + 1, "TokenWindows: ", n, " tokens are too few for one window of block_size ", block_size,
              " + 1 (the targets are shifted by one)");
  size_ = (n - block_size - 1) / stride + 1;
}

Example TokenWindows::get(int64_t index) const {
  Batch b = get_batch({index});
  return {b.data.squeeze(0), b.target.squeeze(0)};
}

Batch TokenWindows::get_batch(const std::vector<int64_t>& indices) const {
  const auto B = static_cast<int64_t>(indices.size()), T = block_size_;
  std::vector<int64_t> x(static_cast<size_t>(B * T)), y(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = indices[static_cast<size_t>(b)];
    BRISK_CHECK(i >= 0 && i < size_, "TokenWindows: index ", i, " is outside [0, ", size_, ")");
    const int32_t* src = tokens_->data() + i * stride_;
    for (int64_t t = 0; t < T; ++t) {
      x[static_cast<size_t>(b * T + t)] = src[t];
      y[static_cast<size_t>(b * T + t)] = src[t + 1];
    }
  }
  return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

}  // namespace brisk::data
