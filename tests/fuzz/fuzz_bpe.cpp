// Fuzzes GPT-2's BPE tokenizer (data::GPT2Tokenizer). The first byte picks what the rest is:
//   even: text for a fixed small vocabulary: encode must not crash on any bytes (invalid UTF-8
//         included), the pre-tokens must tile the text, and decode(encode(x)) must be x;
//   odd:  a vocab.json and a merges.txt separated by a NUL byte: loading either succeeds or throws
//         brisk::Error, and a tokenizer that loads must round-trip the bytes it was given.
#include <brisk/data/bpe.h>
#include <brisk/util/error.h>
#include <brisk/util/json.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include "../common/bpe_bytes.h"

using brisk::data::GPT2Tokenizer;

using brisk::testing::byte_char;
using brisk::testing::mapped;

namespace {

const GPT2Tokenizer& fixed_tokenizer() {
  static const GPT2Tokenizer tok = [] {
    const std::vector<std::pair<std::string, std::string>> merges = {
        {" ", "t"},       {"t", "h"},       {"h", "e"},           {"th", "e"}, {" t", "he"}, {"i", "n"},
        {"e", "r"},       {"a", "n"},       {"n", "d"},           {"an", "d"}, {" ", "a"},   {" a", "nd"},
        {"\xc3", "\xa9"}, {"\xe4", "\xb8"}, {"\xe4\xb8", "\xad"}, {" ", " "},  {"  ", "  "}, {"\n", "\n"},
        {"'", "s"},       {"\xf0", "\x9f"}, {"\xf0\x9f", "\x98"}, {"1", "2"}};
    brisk::json::Value v = brisk::json::Value::object();
    for (int b = 0; b < 256; ++b) v.set(byte_char(static_cast<unsigned char>(b)), b);
    int64_t id = 256;
    std::string m = "#version: 0.2\n";
    for (auto& [a, b] : merges) {
      v.set(mapped(a + b), id++);
      m += mapped(a) + " " + mapped(b) + "\n";
    }
    v.set("<|endoftext|>", id++);
    return GPT2Tokenizer::from_strings(v.dump(), m);
  }();
  return tok;
}

void check_round_trip(const GPT2Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  if (tok.decode(ids) != text) __builtin_trap();
  if (tok.encode(text) != ids) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    size_t covered = 0;
    for (std::string_view p : GPT2Tokenizer::pretokenize(rest)) {
      if (p.empty() || p.data() != rest.data() + covered) __builtin_trap();
      covered += p.size();
    }
    if (covered != rest.size()) __builtin_trap();
    check_round_trip(fixed_tokenizer(), rest);
    return 0;
  }
  const size_t nul = rest.find('\0');
  std::string_view vocab = rest.substr(0, nul), merges = nul == std::string_view::npos ? "" : rest.substr(nul + 1);
  try {
    GPT2Tokenizer tok = GPT2Tokenizer::from_strings(vocab, merges);
    if (tok.vocab_size() < 256) __builtin_trap();  // every byte must have a token
    check_round_trip(tok, vocab);
    check_round_trip(tok, merges);
    std::vector<int32_t> bad{static_cast<int32_t>(tok.vocab_size())};
    try {
      tok.decode(bad);
      __builtin_trap();
    } catch (const brisk::Error&) {
    }
  } catch (const brisk::Error&) {
  }
  return 0;
}
