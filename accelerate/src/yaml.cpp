// Flat YAML: one `key: value` per line, scalars only. Enough for brisk's config file and small
// enough to read in one sitting; anything richer is rejected with the line it is on.
#include "brisk/accelerate/yaml.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_map>

#include "brisk/core/env.h"
#include "brisk/core/error.h"

namespace brisk::accelerate::yaml {

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
  static const char* specials[] = {".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf", ".nan", ".NaN", ".NAN"};
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

// How YAML's core schema reads an unquoted scalar.
Value::Kind classify(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Value::Kind::Null;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE")
    return Value::Kind::Bool;
  if (is_int_text(s)) return Value::Kind::Int;
  if (is_float_text(s)) return Value::Kind::Float;
  return Value::Kind::String;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
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
  if (!is_float_text(s)) s += ".0";  // "2" would read back as an integer
  return s;
}

// True when `s` written without quotes reads back as the same string.
bool plain_safe(const std::string& s) {
  if (s.empty() || classify(s) != Value::Kind::String) return false;
  std::string l = lower(s);
  if (l == "yes" || l == "no" || l == "on" || l == "off" || l == "y" || l == "n") return false;  // YAML 1.1 booleans
  if (std::string("-?:,[]{}#&*!|>'\"%@` \t").find(s.front()) != std::string::npos) return false;
  if (s.back() == ' ' || s.back() == '\t' || s.back() == ':') return false;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos || s.find("\t#") != std::string::npos)
    return false;
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

std::string quote(const std::string& s) {
  bool control = false;
  for (char c : s) control |= static_cast<unsigned char>(c) < 0x20;
  if (!control) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  }
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

Value Value::null() {
  return {};
}
Value Value::boolean(bool v) {
  return {Kind::Bool, v ? "true" : "false"};
}
Value Value::integer(int64_t v) {
  return {Kind::Int, std::to_string(v)};
}
Value Value::number(double v) {
  return {Kind::Float, shortest_double(v)};
}
Value Value::string(std::string v) {
  return {Kind::String, std::move(v)};
}

bool Value::as_bool(const std::string& what) const {
  if (kind != Kind::Null)
    if (const std::optional<bool> b = parse_bool_word(text)) return *b;
  BRISK_THROW(what, ": expected a boolean (", kBoolWords, "), got '", text, "'");
}

int64_t Value::as_int(const std::string& what) const {
  BRISK_CHECK(kind == Kind::Int, what, ": expected an integer, got '", text, "'");
  const std::optional<int64_t> v = parse_integer<int64_t>(text);
  BRISK_CHECK(v.has_value(), what, ": integer '", text, "' is out of range [", std::numeric_limits<int64_t>::min(),
              ", ", std::numeric_limits<int64_t>::max(), "]");
  return *v;
}

double Value::as_double(const std::string& what) const {
  BRISK_CHECK(kind == Kind::Int || kind == Kind::Float, what, ": expected a number, got '", text, "'");
  std::string t = lower(text);
  if (t == ".nan") return std::numeric_limits<double>::quiet_NaN();
  if (t == ".inf" || t == "+.inf") return std::numeric_limits<double>::infinity();
  if (t == "-.inf") return -std::numeric_limits<double>::infinity();
  return std::strtod(text.c_str(), nullptr);
}

std::string Value::as_string(const std::string& what) const {
  BRISK_CHECK(kind != Kind::Null, what, ": expected a value, got nothing (null)");
  return text;
}

Document parse(const std::string& text, const std::string& source) {
  Document doc;
  std::unordered_map<std::string, size_t> seen;  // key -> index in doc
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto fail = [&](const std::string& msg) { BRISK_THROW(source, ":", line_no, ": ", msg); };

    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (first > 0) fail("indented line: brisk's config holds flat `key: value` lines only (no nested values)");
    if (line.rfind("---", 0) == 0 && line.find_first_not_of(" \t", 3) == std::string::npos) {
      if (!doc.empty()) fail("a second YAML document ('---') is not supported");
      continue;
    }
    if (line == "...") break;
    if (line[0] == '-') fail("lists are not supported: expected `key: value`");

    size_t colon = line.find(':');
    if (colon == std::string::npos) fail("expected `key: value`, got '" + line + "'");
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key.empty()) fail("missing key before ':'");
    for (char c : key)
      if (!is_key_char(c)) fail("bad key '" + key + "': keys use letters, digits, '_', '-' and '.'");
    if (colon + 1 < line.size() && line[colon + 1] != ' ' && line[colon + 1] != '\t')
      fail("expected a space after '" + key + ":'");

    std::string rest = line.substr(colon + 1);
    size_t start = rest.find_first_not_of(" \t");
    rest = start == std::string::npos ? "" : rest.substr(start);

    Value v;
    v.line = line_no;
    auto only_comment_after = [&](size_t i) {
      size_t k = rest.find_first_not_of(" \t", i);
      if (k != std::string::npos && rest[k] != '#') fail("unexpected text after the quoted value of '" + key + "'");
    };
    if (!rest.empty() && rest[0] == '\'') {
      size_t i = 1;
      for (;; ++i) {
        if (i >= rest.size()) fail("unterminated single-quoted value for '" + key + "'");
        if (rest[i] == '\'') {
          if (i + 1 < rest.size() && rest[i + 1] == '\'') {
            v.text += '\'';
            ++i;
            continue;
          }
          break;
        }
        v.text += rest[i];
      }
      only_comment_after(i + 1);
      v.kind = Value::Kind::String;
      v.quoted = true;
    } else if (!rest.empty() && rest[0] == '"') {
      size_t i = 1;
      for (;; ++i) {
        if (i >= rest.size()) fail("unterminated double-quoted value for '" + key + "'");
        char c = rest[i];
        if (c == '"') break;
        if (c != '\\') {
          v.text += c;
          continue;
        }
        if (++i >= rest.size()) fail("unterminated double-quoted value for '" + key + "'");
        switch (rest[i]) {
          case 'n':
            v.text += '\n';
            break;
          case 't':
            v.text += '\t';
            break;
          case 'r':
            v.text += '\r';
            break;
          case '"':
            v.text += '"';
            break;
          case '\\':
            v.text += '\\';
            break;
          case '/':
            v.text += '/';
            break;
          case 'x': {
            if (i + 2 >= rest.size()) fail("bad \\x escape in the value of '" + key + "'");
            v.text += static_cast<char>(std::strtol(rest.substr(i + 1, 2).c_str(), nullptr, 16));
            i += 2;
            break;
          }
          default:
            fail(std::string("unknown escape '\\") + rest[i] + "' in the value of '" + key + "'");
        }
      }
      only_comment_after(i + 1);
      v.kind = Value::Kind::String;
      v.quoted = true;
    } else {
      if (!rest.empty() && std::string("[{").find(rest[0]) != std::string::npos)
        fail("lists and mappings ('" + rest + "') are not supported: write a plain value");
      if (!rest.empty() && std::string("&*!|>").find(rest[0]) != std::string::npos)
        fail("anchors, aliases, tags and block scalars are not supported (value of '" + key + "')");
      for (size_t i = 1; i < rest.size(); ++i)
        if (rest[i] == '#' && (rest[i - 1] == ' ' || rest[i - 1] == '\t')) {
          rest.resize(i);
          break;
        }
      if (!rest.empty() && rest[0] == '#') rest.clear();
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.pop_back();
      v.text = rest;
      v.kind = classify(rest);
    }
    // A hash set of the keys so far: a file of many keys is read in linear time.
    if (auto [it, fresh] = seen.emplace(key, doc.size()); !fresh)
      fail("duplicate key '" + key + "' (first on line " + std::to_string(doc[it->second].second.line) + ")");
    doc.emplace_back(key, std::move(v));
  }
  return doc;
}

std::string write(const Document& doc, const std::string& comment) {
  std::string out;
  size_t pos = 0;
  while (!comment.empty() && pos <= comment.size()) {
    size_t end = comment.find('\n', pos);
    if (end == std::string::npos) end = comment.size();
    std::string line = comment.substr(pos, end - pos);
    out += line.empty() ? "#\n" : "# " + line + "\n";
    pos = end + 1;
  }
  for (const auto& [key, v] : doc) {
    BRISK_CHECK(!key.empty(), "yaml::write: empty key");
    for (char c : key) BRISK_CHECK(is_key_char(c), "yaml::write: bad key '", key, "'");
    out += key + ": ";
    switch (v.kind) {
      case Value::Kind::Null:
        out += "null";
        break;
      case Value::Kind::Bool:
      case Value::Kind::Int:
      case Value::Kind::Float:
        out += v.text;
        break;
      case Value::Kind::String:
        out += plain_safe(v.text) ? v.text : quote(v.text);
        break;
    }
    out += "\n";
  }
  return out;
}

const Value* find(const Document& doc, const std::string& key) {
  for (const auto& [k, v] : doc)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace brisk::accelerate::yaml
