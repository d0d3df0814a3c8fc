// Fuzzes the reader of llm.c's .bin token files (data::parse_token_file): any bytes must either
// parse or throw brisk::Error. A file that parses has exactly 1024 + 2 * count bytes and its
// tokens are uint16 values; written back (token_file_bytes) they parse to the same tokens, in the
// same bytes when the header's unused ints are zero.
#include <brisk/data/tokens.h>
#include <brisk/util/error.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace data = brisk::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(bytes), size);
  std::vector<int32_t> tokens;
  try {
    tokens = data::parse_token_file(text, "fuzz.bin");
  } catch (const brisk::Error&) {
    return 0;
  }
  if (size != 1024 + 2 * tokens.size()) __builtin_trap();
  for (int32_t t : tokens)
    if (t < 0 || t > 65535) __builtin_trap();
  const std::string back = data::token_file_bytes(tokens);
  if (data::parse_token_file(back, "written") != tokens) __builtin_trap();
  bool unused_zero = true;
  for (size_t i = 12; i < 1024; ++i) unused_zero = unused_zero && text[i] == 0;
  if (unused_zero && back != text) __builtin_trap();
  return 0;
}
