// GPT-2's bytes_to_unicode written out again for the tests (not taken from data/bpe.cpp, so a
// mistake there cannot hide): each byte's character as UTF-8, and a byte string so mapped.
#pragma once
#include <string>
#include <string_view>

namespace brisk::testing {

inline std::string byte_char(unsigned char b) {
  auto printable = [](int c) { return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF); };
  int cp = b;
  if (!printable(b)) {  // the unprintable bytes take 256, 257, ... in byte order
    cp = 256;
    for (int c = 0; c < b; ++c) cp += printable(c) ? 0 : 1;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

inline std::string mapped(std::string_view bytes) {
  std::string s;
  for (unsigned char b : bytes) s += byte_char(b);
  return s;
}

}  // namespace brisk::testing
