// YAML for config files: yaml-cpp reads (when the build found it), this file turns its nodes into
// brisk's ordered value tree and writes that tree back in PyYAML's block style.
#include "brisk/accelerate/yaml.h"

#ifdef BRISK_HAVE_YAML_CPP
#include <yaml-cpp/yaml.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_map>

#include "brisk/util/env.h"
#include "brisk/util/error.h"
#include "brisk/util/json.h"
#include "yaml_scalar.h"

namespace brisk::accelerate::yaml {

using detail::classify;
using detail::shortest_double;

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
  std::string t = detail::ascii_lower(text);
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

  // A scalar's text. yaml-cpp 0.7 reads the escapes \N and \_ as the single bytes 0x85 and 0xA0,
  // not as the UTF-8 of U+0085 and U+00A0 (later versions fix it). Every other byte of a scalar is
  // UTF-8 (check_text saw the file's; the other escapes give UTF-8) and neither byte can continue
  // a character, so a byte that is not UTF-8 is one of the two: it becomes the character it means.
  std::string text_of(const YAML::Node& n) {
    const std::string& raw = n.Scalar();
    std::string s;
    for (size_t i = 0; i < raw.size();) {
      const detail::Utf8Char ch = detail::decode_utf8(raw, i);
      const auto byte = static_cast<unsigned char>(raw[i]);
      if (ch.size == 0 && byte != 0x85 && byte != 0xA0)
        fail(n.Mark(), "the text " + detail::shown(raw) + " is not UTF-8");
      if (ch.size == 0) s += '\xC2';
      s.append(raw, i, std::max<size_t>(ch.size, 1));
      i += std::max<size_t>(ch.size, 1);
    }
    return s;
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
        v.text = text_of(n);
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
          if (kv.first.IsNull())
            fail(kv.first.Mark().is_null() ? kv.second.Mark() : kv.first.Mark(),
                 "a key must not be empty or null (`: 1`, `~: 1`, `null: 1`); to use the word null as a key, quote "
                 "it ('null': 1)");
          if (!kv.first.IsScalar()) fail(kv.first.Mark(), "a key must be a single value, not a list or mapping");
          const std::string key = text_of(kv.first);
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

// The characters of one line (`column0`: the column of its first byte): UTF-8, and each one of
// YAML's printable characters. Bytes that are not UTF-8 cannot be read back from anything brisk
// writes (YAML holds Unicode text; yaml-cpp 0.7 would pass them through as they are), and a line's
// control characters are the ones yaml-cpp 0.7 loops forever on (a NUL after a comma).
void check_characters(std::string_view line, const std::string& source, int line_no, size_t column0) {
  for (size_t i = 0; i < line.size();) {
    const detail::Utf8Char ch = detail::decode_utf8(line, i);
    if (ch.size == 0) {
      std::string bytes;
      for (size_t k = i; k < line.size() && k < i + 4 && (k == i || detail::decode_utf8(line, k).size == 0); ++k) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%s0x%02X", k > i ? " " : "", static_cast<unsigned char>(line[k]));
        bytes += hex;
      }
      BRISK_THROW(source, ":", line_no, ":", column0 + i + 1, ": bytes that are not UTF-8 (", bytes, ") in ",
                  detail::shown(line), "; brisk reads YAML files as UTF-8 text: save the file as UTF-8");
    }
    if (!detail::yaml_printable(ch.code)) {
      char name[16];
      std::snprintf(name, sizeof name, ch.code < 0x80 ? "0x%02X" : "U+%04X", static_cast<unsigned>(ch.code));
      BRISK_THROW(
          source, ":", line_no, ":", column0 + i + 1, ": ", ch.code < 0xA0 ? "control character " : "character ", name,
          " is not allowed in YAML (in double quotes, write it as ", detail::shown(line.substr(i, ch.size)), ")");
    }
    i += ch.size;
  }
}

// What brisk checks before yaml-cpp reads the text, line by line: its characters (above), and one
// document, so a '---' or '...' line after the first content line is refused. yaml-cpp 0.7 loops
// forever on some such input (LoadAll on some malformed documents: found by fuzzing), so it never
// sees it. A UTF-8 byte-order mark may open the file (yaml-cpp skips it there).
void check_text(const std::string& text, const std::string& source) {
  if (text.starts_with("\xFE\xFF") || text.starts_with("\xFF\xFE"))
    BRISK_THROW(source, ": the file is UTF-16 (it starts with a UTF-16 byte-order mark); brisk reads YAML files ",
                "as UTF-8 text: save it as UTF-8");
  const size_t bom = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  bool content = false;
  int line_no = 0;
  for (size_t pos = bom; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    ++line_no;
    check_characters(line, source, line_no, line_no == 1 ? bom : 0);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
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
      return detail::string_text(v.text, flow);
    default:
      return v.text;
  }
}

// yaml-cpp (and YAML itself) take `key:` for a key only when the key's text, quotes and escapes
// included, is at most 1024 bytes long (PyYAML: characters); a longer key (which a file can hold
// as an explicit key) is written as one too: "? key", then ": value" on the next line.
constexpr size_t kMaxImplicitKey = 1024;

// A key and the colon after it: at the start of an entry of a block mapping at `indent`, or in {..}.
std::string key_colon(const std::string& key, const std::string& indent, bool flow) {
  const std::string k = detail::string_text(key, flow);
  if (k.size() <= kMaxImplicitKey) return k + ":";
  return flow ? "? " + k + " :" : "? " + k + "\n" + indent + ":";
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
      out += key_colon(v.entries[i].first, "", true);
      out += ' ';
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
    out += key_colon(key, indent, false);
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

// Every key and string must be UTF-8 (no YAML file holds other bytes, and an escape stands for a
// character, not a byte). Checked before writing so that the error names where the text is:
// "yaml::write: mpirun_config.mpirun_hostfile: ...", "yaml::write: a key in list[2]: ...". `where`
// grows and shrinks in place as the walk descends.
void require_utf8(const Value& v, std::string& where) {
  if (v.kind == Value::Kind::String && !json::valid_utf8(v.text)) detail::require_utf8(v.text, "yaml::write: " + where);
  const size_t size = where.size();
  for (size_t i = 0; i < v.items.size(); ++i) {
    where += '[';
    where += std::to_string(i);
    where += ']';
    require_utf8(v.items[i], where);
    where.resize(size);
  }
  for (const auto& [key, item] : v.entries) {
    if (!json::valid_utf8(key)) detail::require_utf8(key, "yaml::write: a key in " + where);
    where += '.';
    where += key;
    require_utf8(item, where);
    where.resize(size);
  }
}

}  // namespace

std::string write(const Document& doc, const std::string& comment) {
  for (const auto& [key, v] : doc) {
    detail::require_utf8(key, "yaml::write: a key");
    std::string where = key;
    require_utf8(v, where);
  }
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
