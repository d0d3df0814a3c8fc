// Test helper for the binary-format tests: a 64-bit value as the 8 little-endian bytes the
// safetensors header length (and other headers) are written in.
#pragma once
#include <cstdint>
#include <string>

namespace brisk::testing {

inline std::string le64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

}  // namespace brisk::testing
