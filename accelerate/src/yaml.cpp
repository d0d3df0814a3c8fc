// YAML for config files: yaml-cpp reads (when the build found it), this file turns its nodes into
// brisk's ordered value tree and writes that tree back in PyYAML's block style.
#include "brisk/accelerate/yaml.h"

#ifdef BRISK_HAVE_YAML_CPP
#include <yaml-cpp/yaml.h>
#endif

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_map>

#include "brisk/util/env.h"
#include "brisk/util/error.h"

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
namespace {
Value scalar(Value::Kind kind, std::string text) {
  Value v;
  v.kind = kind;
  v.text = std::move(text);
  return v;
}
}  // namespace

Value Value::boolean(bool v) {
  return scalar(Kind::Bool, v ? "true" : "false");
}
Value Value::integer(int64_t v) {
  return scalar(Kind::Int, std::to_string(v));
}
Value Value::number(double v) {
  return scalar(Kind::Float, shortest_double(v));
}
Value Value::string(std::string v) {
  return scalar(Kind::String, std::move(v));
}
Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind = Kind::List;
  v.items = std::move(items);
  return v;
}
Value Value::map(std::vector<Entry> entries) {
  Value v;
  v.kind = Kind::Map;
  v.entries = std::move(entries);
  return v;
}

const Value* Value::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

bool Value::operator==(const Value& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::Null:
      return true;
    case Kind::List:
      return items == o.items;
    case Kind::Map:
      return entries == o.entries;
    default:
      return text == o.text;
  }
}

bool Value::as_bool(const std::string& what) const {
  BRISK_CHECK(is_scalar(), what, ": expected a boolean, got a ", kind == Kind::List ? "list" : "mapping");
  if (kind != Kind::Null)
    if (const std::optional<bool> b = parse_bool_word(text)) return *b;
  BRISK_THROW(what, ": expected a boolean (", kBoolWords, "), got '", text, "'");
}

int64_t Value::as_int(const std::string& what) const {
  BRISK_CHECK(is_scalar(), what, ": expected an integer, got a ", kind == Kind::List ? "list" : "mapping");
  BRISK_CHECK(kind == Kind::Int, what, ": expected an integer, got '", text, "'");
  const std::optional<int64_t> v = parse_integer<int64_t>(text);
  BRISK_CHECK(v.has_value(), what, ": integer '", text, "' is out of range [", std::numeric_limits<int64_t>::min(),
              ", ", std::numeric_limits<int64_t>::max(), "]");
  return *v;
}

double Value::as_double(const std::string& what) const {
  BRISK_CHECK(is_scalar(), what, ": expected a number, got a ", kind == Kind::List ? "list" : "mapping");
  BRISK_CHECK(kind == Kind::Int || kind == Kind::Float, what, ": expected a number, got '", text, "'");
  std::string t = lower(text);
  if (t == ".nan") return std::numeric_limits<double>::quiet_NaN();
  if (t == ".inf" || t == "+.inf") return std::numeric_limits<double>::infinity();
  if (t == "-.inf") return -std::numeric_limits<double>::infinity();
  return std::strtod(text.c_str(), nullptr);
}

std::string Value::as_string(const std::string& what) const {
  BRISK_CHECK(kind != Kind::Null, what, ": expected a value, got nothing (null)");
  BRISK_CHECK(is_scalar(), what, ": expected a single value, got a ", kind == Kind::List ? "list" : "mapping");
  return text;
}

#ifdef BRISK_HAVE_YAML_CPP
namespace {

// Bounds on what one file may expand to: aliases make a small file describe a huge tree (a
// "billion laughs" of aliases of aliases), and every later step (checks, writing the file back)
// costs in proportion to the expanded tree. Without aliases every value takes at least one byte
// of the file and no text is repeated, so the bounds are the file's own size plus what aliases
// may add: 10,000 values and 256 KiB of text, far above any config file (tens of values).
constexpr int kMaxDepth = 64;
constexpr size_t kMaxAliasValues = 10000;
constexpr size_t kMaxAliasBytes = size_t{256} << 10;

struct Converter {
  const std::string& source;
  size_t max_nodes;  // the file's size + kMaxAliasValues
  size_t max_bytes;  // the file's size + kMaxAliasBytes
  size_t nodes = 0;
  size_t bytes = 0;  // scalars and keys, counted each time an alias repeats them

  void count_bytes(const YAML::Node& n, size_t size) {
    bytes += size;
    if (bytes > max_bytes) fail(n.Mark(), "aliases expand the text by more than 256 KiB beyond the file's own");
  }

  [[noreturn]] void fail(const YAML::Mark& m, const std::string& msg) {
    if (m.is_null()) BRISK_THROW(source, ": ", msg);
    BRISK_THROW(source, ":", m.line + 1, ":", m.column + 1, ": ", msg);
  }

  Value convert(const YAML::Node& n, int depth) {
    if (++nodes > max_nodes) fail(n.Mark(), "aliases expand the document by more than 10,000 values");
    if (depth > kMaxDepth) fail(n.Mark(), "values nested more than 64 deep");
    Value v;
    v.line = n.Mark().is_null() ? 0 : n.Mark().line + 1;
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return v;
      case YAML::NodeType::Scalar:
        v.text = n.Scalar();
        count_bytes(n, v.text.size());
        v.quoted = n.Tag() == "!";  // a quoted (non-plain) scalar is always a string
        v.kind = v.quoted ? Value::Kind::String : classify(v.text);
        if (v.kind == Value::Kind::Null) v.text.clear();
        return v;
      case YAML::NodeType::Sequence:
        v.kind = Value::Kind::List;
        for (const YAML::Node& item : n) v.items.push_back(convert(item, depth + 1));
        return v;
      case YAML::NodeType::Map: {
        v.kind = Value::Kind::Map;
        std::unordered_map<std::string, int> seen;  // key -> line: linear in the number of keys
        for (const auto& kv : n) {
          if (!kv.first.IsScalar()) fail(kv.first.Mark(), "a key must be a single value, not a list or mapping");
          const std::string key = kv.first.Scalar();
          count_bytes(kv.first, key.size());
          const int line = kv.first.Mark().is_null() ? 0 : kv.first.Mark().line + 1;
          if (auto [it, fresh] = seen.emplace(key, line); !fresh)
            fail(kv.first.Mark(), "duplicate key '" + key + "' (first on line " + std::to_string(it->second) + ")");
          v.entries.push_back({key, convert(kv.second, depth + 1)});
        }
        return v;
      }
    }
    return v;
  }
};

}  // namespace

bool available() {
  return true;
}

namespace {

// What brisk checks before yaml-cpp reads the text, line by line: no C0 control character but tab
// (and the line breaks), nor DEL, as YAML requires; and one document, so a '---' or '...' line
// after the first content line is refused. yaml-cpp 0.7 loops forever on some such input (a NUL
// after a comma; LoadAll on some malformed documents: found by fuzzing), so it never sees it.
void check_text(const std::string& text, const std::string& source) {
  bool content = false;
  int line_no = 0;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    for (size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7F) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", c);
        BRISK_THROW(source, ":", line_no, ":", i + 1, ": control character ", hex, " is not allowed in YAML");
      }
    }
    const auto starts = [&](std::string_view m) {
      return line.starts_with(m) && (line.size() == 3 || line[3] == ' ' || line[3] == '\t');
    };
    const bool marker = starts("---");
    if ((marker || starts("...")) && content)
      BRISK_THROW(source, ":", line_no, ": a config file holds one YAML document; this line starts another");
    // Content: anything but blanks, comments and directives (%); after a '---', what follows it.
    const size_t first = line.find_first_not_of(" \t", marker ? 3 : 0);
    if (first != std::string_view::npos && line[first] != '#' && (marker || line[0] != '%')) content = true;
  }
}

}  // namespace

Document parse(const std::string& text, const std::string& source) {
  check_text(text, source);
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) BRISK_THROW(source, ": ", e.msg);
    BRISK_THROW(source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg);
  }
  Converter c{source, text.size() + kMaxAliasValues, text.size() + kMaxAliasBytes};
  Value top;
  try {
    top = c.convert(doc, 0);
  } catch (const YAML::Exception& e) {  // conversions of odd nodes (e.g. a bad alias)
    BRISK_THROW(source, ": ", e.msg);
  }
  if (top.is_null()) return {};
  if (top.kind != Value::Kind::Map)
    c.fail(doc.Mark(), "expected `key: value` lines (a mapping) at the top level, got a " +
                           std::string(top.kind == Value::Kind::List ? "list" : "single value"));
  return std::move(top.entries);
}
#else
bool available() {
  return false;
}

Document parse(const std::string&, const std::string& source) {
  BRISK_THROW(source, ": this build of brisk reads no YAML: it was configured without yaml-cpp. Install it ",
              "(apt-get install libyaml-cpp-dev) and configure again, or pass the settings as flags");
}
#endif

namespace {

std::string scalar_text(const Value& v, bool flow) {
  switch (v.kind) {
    case Value::Kind::Null:
      return "null";
    case Value::Kind::String:
      // In flow context ([a, b], {k: v}) commas and brackets end a plain scalar: always quote.
      return !flow && plain_safe(v.text) ? v.text : quote(v.text);
    default:
      return v.text;
  }
}

std::string key_text(const std::string& k) {
  return plain_safe(k) ? k : quote(k);
}

// Lists and mappings inside a list are written in flow style ([..], {..}).
void flow(const Value& v, std::string& out) {
  if (v.kind == Value::Kind::List) {
    out += '[';
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i) out += ", ";
      flow(v.items[i], out);
    }
    out += ']';
  } else if (v.kind == Value::Kind::Map) {
    out += '{';
    for (size_t i = 0; i < v.entries.size(); ++i) {
      if (i) out += ", ";
      out += quote(v.entries[i].first);
      out += ": ";
      flow(v.entries[i].second, out);
    }
    out += '}';
  } else {
    out += scalar_text(v, true);
  }
}

// A value after "key: " or "- ": scalars plain where safe, containers in flow style.
void inline_value(const Value& v, std::string& out) {
  if (v.is_scalar())
    out += scalar_text(v, false);
  else
    flow(v, out);
  out += '\n';
}

void write_entries(const std::vector<Value::Entry>& entries, const std::string& indent, std::string& out) {
  for (const auto& [key, v] : entries) {
    out += indent;
    out += key_text(key);
    out += ':';
    if (v.kind == Value::Kind::Map && !v.entries.empty()) {
      out += '\n';
      write_entries(v.entries, indent + "  ", out);
    } else if (v.kind == Value::Kind::List && !v.items.empty()) {
      out += '\n';
      for (const Value& item : v.items) {
        out += indent;
        out += "- ";
        inline_value(item, out);
      }
    } else {
      out += ' ';
      inline_value(v, out);
    }
  }
}

}  // namespace

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
  write_entries(doc, "", out);
  return out;
}

const Value* find(const Document& doc, const std::string& key) {
  for (const auto& [k, v] : doc)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace brisk::accelerate::yaml
