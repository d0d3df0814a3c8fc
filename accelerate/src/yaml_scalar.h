// Internal: one scalar of a config file, read and written: YAML's core-schema kinds, UTF-8, and the
// choice between plain, 'single-quoted' and "double-quoted" text that reads back as the same string.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "brisk/accelerate/yaml.h"

namespace brisk::accelerate::yaml::detail {

// How YAML's core schema reads an unquoted scalar: null, true/false, integers, floats, else strings.
Value::Kind classify(const std::string& s);
std::string ascii_lower(std::string s);
// The shortest text that reads back as exactly `v`, and as a float (not an integer or a string) in
// both YAML 1.2 and YAML 1.1 (PyYAML): "2.0", "0.1", "1.0e+20", ".inf", ".nan".
std::string shortest_double(double v);

// One character of a UTF-8 string: its code point and its length in bytes; length 0 where the bytes
// at that offset are not UTF-8 (a stray continuation byte, a truncated or overlong sequence, a
// surrogate, a code point past U+10FFFF).
struct Utf8Char {
  char32_t code = 0;
  size_t size = 0;
};
Utf8Char decode_utf8(std::string_view s, size_t at);

// YAML 1.2's printable characters, the only ones a file may hold as they are: tab, line feed,
// carriage return, U+0020-U+007E, NEL (U+0085), U+00A0-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF.
bool yaml_printable(char32_t c);

// `s` for an error message, in double quotes: what the writer escapes is escaped ("\ufeff"), bytes
// that are not UTF-8 are shown as \xFE, and past `max_bytes` of `s` it is cut short ("...").
std::string shown(std::string_view s, size_t max_bytes = 80);

// Throws brisk::Error "<what>: "<s>" is not UTF-8 (byte N)..." when `s` is not UTF-8.
void require_utf8(std::string_view s, const std::string& what);

// `s` as scalar text that every YAML reader (yaml-cpp, PyYAML) reads back as the string `s`:
//  - double-quoted, with escapes, when it holds a character that is not shown as it is: controls,
//    tab, line breaks (NEL, U+2028, U+2029 too), invisible and format characters (a byte-order
//    mark, U+200B, U+00A0, ...), noncharacters;
//  - plain when nothing in it means something else to a reader (see plain_safe in the .cpp);
//  - else single-quoted.
// `flow`: the scalar stands inside [..] or {..}, where commas and brackets end plain text, so
// strings are always quoted. Throws brisk::Error when `s` is not UTF-8: YAML holds Unicode text
// only, and an escape such as "\xfe" reads back as the character U+00FE, not the byte.
std::string string_text(const std::string& s, bool flow);

}  // namespace brisk::accelerate::yaml::detail
