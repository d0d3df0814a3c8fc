// A reader and writer for flat YAML files (`key: value` per line, scalars only), the format of
// brisk's config file. No dependency; nested mappings, lists and anchors are rejected clearly.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace brisk::accelerate::yaml {

// One scalar. `text` is the value as written, without quotes, so callers can convert leniently
// (`mixed_precision: no` reads as the string "no"; `use_cpu: no` as false).
struct Value {
  enum class Kind { Null, Bool, Int, Float, String };
  Kind kind = Kind::Null;
  std::string text;
  bool quoted = false;  // written in '...' or "..." (always a String)
  int line = 0;         // 1-based line in the source; 0 when built in code

  static Value null();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);

  bool is_null() const { return kind == Kind::Null; }
  // Conversions throw brisk::Error naming `what` (e.g. "config.yaml:3: num_processes") and the text.
  bool as_bool(const std::string& what) const;  // true/false, yes/no, on/off (any case)
  int64_t as_int(const std::string& what) const;
  double as_double(const std::string& what) const;
  std::string as_string(const std::string& what) const;  // any non-null scalar, as written
  // Same kind and text (every null equals every other: "~", "null" and "" mean the same).
  bool operator==(const Value& o) const { return kind == o.kind && (kind == Kind::Null || text == o.text); }
};

// Keys in file order.
using Document = std::vector<std::pair<std::string, Value>>;

// Parses `text`; errors throw brisk::Error as "<source>:<line>: <what is wrong>".
// Accepts comments (`# ...`, also after a value), blank lines, a leading `---`, single- and
// double-quoted strings (with '' and \" \\ \n \t escapes). Rejects duplicate keys, indentation
// (nested values), lists and flow collections.
Document parse(const std::string& text, const std::string& source);

// Writes one `key: value` line per entry after `comment` (each of its lines prefixed by "# ").
// Strings that would read back as something else (no, true, 3, empty, ...) are single-quoted.
std::string write(const Document& doc, const std::string& comment = "");

// The value for `key`, or nullptr.
const Value* find(const Document& doc, const std::string& key);

}  // namespace brisk::accelerate::yaml
