// One scalar of a config file: how unquoted text is classified, and how a string is written so that
// yaml-cpp (brisk) and PyYAML (Accelerate) read it back unchanged: plain, 'single' or "double" quoted.
#include "yaml_scalar.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "brisk/util/error.h"
#include "brisk/util/json.h"

namespace brisk::accelerate::yaml::detail {

namespace {

bool all_digits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

bool is_int_text(const std::string& s) {
  return all_digits(s, (s[0] == '-' || s[0] == '+') ? 1 : 0);
}

bool is_float_text(const std::string& s) {
  static const char* specials[] = {".inf",  ".Inf",  ".INF",  "-.inf", "-.Inf", "-.INF",
                                   "+.inf", "+.Inf", "+.INF", ".nan",  ".NaN",  ".NAN"};
  for (const char* sp : specials)
    if (s == sp) return true;
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  bool dot = i < s.size() && s[i] == '.';
  if (dot) {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return false;
  bool exponent = i < s.size() && (s[i] == 'e' || s[i] == 'E');
  if (exponent) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!all_digits(s.substr(i), 0)) return false;
    i = s.size();
  }
  return i == s.size() && (dot || exponent);
}

// A cursor over a plain scalar, for the YAML 1.1 patterns below.
struct Scan {
  std::string_view s;
  size_t i = 0;
  bool done() const { return i == s.size(); }
  bool eat(char c) {
    if (i == s.size() || s[i] != c) return false;
    ++i;
    return true;
  }
  size_t eat_all(std::string_view set) {
    const size_t from = i;
    while (i < s.size() && set.find(s[i]) != std::string_view::npos) ++i;
    return i - from;
  }
};

constexpr std::string_view kDigits = "0123456789";
constexpr std::string_view kDigitsOr_ = "0123456789_";

// Whether PyYAML (YAML 1.1's resolver, which Accelerate reads config files with) takes this plain
// scalar for something other than a string, beyond what the core schema does: 0x1f, 0b101, 017,
// 1_000, 1.5_0, .5, sexagesimal 1:30 and 1:30.5, dates (2024-01-31...), '=' (a value) and '<<' (a
// merge). A slight over-approximation of its patterns: quoting more than needed reads the same.
bool yaml11_non_string(std::string_view s) {
  if (s == "=" || s == "<<") return true;
  if (s.size() >= 6 && Scan{s.substr(0, 4)}.eat_all(kDigits) == 4 && s[4] == '-' && kDigits.find(s[5]) != s.npos)
    return true;  // a date or timestamp
  Scan c{s};
  if (!c.eat('-')) c.eat('+');
  if (c.eat('.')) return c.eat_all(kDigits) > 0 && (c.eat_all(kDigitsOr_), c.done());  // .5 (exponents: core)
  const size_t body = c.i;
  if (c.eat('0') && (c.eat('x') || c.eat('b'))) return c.eat_all("0123456789abcdefABCDEF_") > 0 && c.done();
  c.i = body;
  if (c.eat_all(kDigits) == 0) return false;
  c.eat_all(kDigitsOr_);
  while (c.eat(':')) {  // sexagesimal: 1:30, 1:30:15, 1:30.5
    if (c.eat_all(kDigits) == 0) return false;
  }
  if (c.eat('.')) {
    c.eat_all(kDigitsOr_);
    if (c.eat('e') || c.eat('E')) return (c.eat('-') || c.eat('+')) && c.eat_all(kDigits) > 0 && c.done();
  }
  return c.done();
}

// Characters a reader shows as nothing or as blank space: Unicode's format characters (Cf), space
// separators other than the space (Zs), line and paragraph separators (Zl, Zp) and the other
// default-ignorable code points (variation selectors, fillers, tags). Written as escapes, they
// stay visible in the file and cannot be taken for a byte-order mark or for indentation.
struct Range {
  char32_t first, last;
};
constexpr std::array<Range, 28> kInvisible = {{
    {0x00A0, 0x00A0},   {0x00AD, 0x00AD},   {0x034F, 0x034F},   {0x0600, 0x0605},   {0x061C, 0x061C},
    {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x115F, 0x1160},
    {0x1680, 0x1680},   {0x17B4, 0x17B5},   {0x180B, 0x180F},   {0x2000, 0x200F},   {0x2028, 0x202F},
    {0x205F, 0x206F},   {0x3000, 0x3000},   {0x3164, 0x3164},   {0xFE00, 0xFE0F},   {0xFEFF, 0xFEFF},
    {0xFFA0, 0xFFA0},   {0xFFF0, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F},
    {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0000, 0xE0FFF},
}};

// Whether the writer puts `c` in a file as it is (else as an escape in double quotes).
bool shown_as_is(char32_t c) {
  if (c >= 0x20 && c < 0x7F) return true;
  if (c < 0xA0) return false;  // C0 controls (tab, line breaks), DEL, C1 controls (NEL)
  if ((c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE) return false;  // noncharacters
  for (const Range& r : kInvisible)
    if (c >= r.first && c <= r.last) return false;
  return true;
}

// "\x1f", "\ufeff", "\U000e0001". Never \N or \_: yaml-cpp 0.7 reads those as single bytes.
std::string escape(char32_t c) {
  char buf[16];
  if (c < 0x80)
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
  else if (c <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
  else
    std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
  return buf;
}

// Appends `c` (the bytes `raw` of `s`) to double-quoted text.
void append_double_quoted(std::string& out, char32_t c, std::string_view raw) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\r':
      out += "\\r";
      return;
    default:
      if (shown_as_is(c))
        out += raw;
      else
        out += escape(c);
  }
}

std::string double_quoted(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const Utf8Char ch = decode_utf8(s, i);
    append_double_quoted(out, ch.code, s.substr(i, ch.size));
    i += ch.size;
  }
  return out + "\"";
}

std::string single_quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string_view("''") : std::string_view(&c, 1);
  return out + "'";
}

// True when `s` (UTF-8, every character shown as it is) written without quotes reads back, in
// yaml-cpp and in PyYAML, as the same string, as a key at the start of a line or as a value after
// "key: " or "- " (block context).
bool plain_safe(const std::string& s) {
  if (s.empty() || classify(s) != Value::Kind::String) return false;
  const std::string l = ascii_lower(s);
  if (l == "yes" || l == "no" || l == "on" || l == "off" || l == "y" || l == "n") return false;  // YAML 1.1 booleans
  if (yaml11_non_string(s)) return false;
  // Indicators: a sequence entry, key, value, flow collection, comment, anchor, alias, tag, block
  // scalar, quote, directive, reserved; or leading blank space, which a reader strips.
  if (std::string_view("-?:,[]{}#&*!|>'\"%@` ").find(s.front()) != std::string_view::npos) return false;
  // "..." followed by a space (or nothing) at the start of a line ends the document.
  if (s.starts_with("...") && (s.size() == 3 || s[3] == ' ')) return false;
  if (s.back() == ' ' || s.back() == ':') return false;                           // stripped; a key's colon
  return s.find(": ") == std::string::npos && s.find(" #") == std::string::npos;  // a value; a comment
}

}  // namespace

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Value::Kind classify(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Value::Kind::Null;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE")
    return Value::Kind::Bool;
  if (is_int_text(s)) return Value::Kind::Int;
  if (is_float_text(s)) return Value::Kind::Float;
  return Value::Kind::String;
}

std::string shortest_double(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  const size_t e = s.find('e');
  // YAML 1.1 (PyYAML) reads a float only with a dot: "1e+20" would be a string there.
  if (s.find('.') == std::string::npos) s.insert(e == std::string::npos ? s.size() : e, ".0");
  return s;
}

Utf8Char decode_utf8(std::string_view s, size_t at) {
  const auto lead = static_cast<unsigned char>(s[at]);
  if (lead < 0x80) return {lead, 1};
  const size_t size = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  // json::valid_utf8 refuses overlong forms, surrogates and code points past U+10FFFF.
  if (size == 0 || at + size > s.size() || !json::valid_utf8(s.substr(at, size))) return {};
  char32_t code = lead & (0x7F >> size);
  for (size_t k = 1; k < size; ++k) code = (code << 6) | (static_cast<unsigned char>(s[at + k]) & 0x3F);
  return {code, size};
}

bool yaml_printable(char32_t c) {
  return c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c <= 0x7E) || c == 0x85 || (c >= 0xA0 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

std::string shown(std::string_view s, size_t max_bytes) {
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size() && i < max_bytes) {
    const Utf8Char ch = decode_utf8(s, i);
    if (ch.size == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(s[i]));
      out += hex;
      ++i;
      continue;
    }
    append_double_quoted(out, ch.code, s.substr(i, ch.size));
    i += ch.size;
  }
  return out + (i < s.size() ? "\"..." : "\"");
}

void require_utf8(std::string_view s, const std::string& what) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Char ch = decode_utf8(s, i);
    BRISK_CHECK(ch.size != 0, what, ": ", shown(s), " is not UTF-8 (byte ", i, "): a YAML file holds UTF-8 text only ",
                "(and an escape such as \\xfe would read back as the character U+00FE, not the byte)");
    i += ch.size;
  }
}

std::string string_text(const std::string& s, bool flow) {
  bool escapes = false;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char ch = decode_utf8(s, i);
    if (ch.size == 0) require_utf8(s, "yaml::write");
    escapes |= !shown_as_is(ch.code);
    i += ch.size;
  }
  if (escapes) return double_quoted(s);
  return !flow && plain_safe(s) ? s : single_quoted(s);
}

}  // namespace brisk::accelerate::yaml::detail
