// YAML for brisk's config files: read with yaml-cpp (Debian's libyaml-cpp-dev) into a small tree of
// values that keeps the file's order and line numbers, written back in the block style PyYAML's
// safe_dump uses, so Accelerate's default_config.yaml reads unchanged and brisk's files read in
// Accelerate. A build without yaml-cpp (an optional dependency) cannot read config files: parse()
// then throws an error that says how to install it; writing needs no library.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace brisk::accelerate::yaml {

// One node. Scalars keep `text` as written, without quotes, so callers convert leniently
// (`mixed_precision: no` reads as the string "no"; `use_cpu: no` as false). Unquoted scalars are
// classified as YAML's core schema does (null, true/false, integers, floats, else strings).
struct Value {
  enum class Kind { Null, Bool, Int, Float, String, List, Map };
  struct Entry;  // one `key: value` of a mapping: .first is the key, .second the value
  Kind kind = Kind::Null;
  std::string text;
  bool quoted = false;         // written in '...' or "..." (always a String)
  int line = 0;                // 1-based line in the source; 0 when built in code
  std::vector<Value> items;    // List
  std::vector<Entry> entries;  // Map, in file order

  static Value null();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value list(std::vector<Value> items);
  static Value map(std::vector<Entry> entries);

  bool is_null() const { return kind == Kind::Null; }
  bool is_scalar() const { return kind != Kind::List && kind != Kind::Map; }
  // Map: the value for `key`, or nullptr (also for any other kind).
  const Value* find(const std::string& key) const;
  // Conversions throw brisk::Error naming `what` (e.g. "config.yaml:3: num_processes") and the text.
  bool as_bool(const std::string& what) const;  // true/false, yes/no, on/off (any case)
  int64_t as_int(const std::string& what) const;
  double as_double(const std::string& what) const;
  std::string as_string(const std::string& what) const;  // any non-null scalar, as written
  // Same kind and content (every null equals every other: "~", "null" and "" mean the same).
  bool operator==(const Value& o) const;
};

// A pair of key and value, spelled as std::pair's members so `auto& [key, value]` reads the same.
// (A std::pair<std::string, Value> inside Value itself would need Value complete.)
struct Value::Entry {
  std::string first;
  Value second;
  bool operator==(const Entry&) const = default;
};

// The top-level mapping, keys in file order.
using Document = std::vector<Value::Entry>;

// True when this build reads YAML (yaml-cpp was found).
bool available();

// Parses `text`, whose top level must be a mapping (an empty file is an empty one). Errors throw
// brisk::Error as "<source>:<line>:<column>: <what is wrong>". The text must be UTF-8 (a byte-order
// mark may open it) of YAML's printable characters: other bytes, control characters (but tab and
// line breaks) and U+FFFE/U+FFFF are refused, naming the line; double-quoted escapes ("\x01",
// "\ufeff") may stand for any character. Duplicate keys, empty or null keys, several documents in
// one file and non-scalar keys are refused; anchors and aliases are resolved (with a bound on the
// expanded size, against alias bombs).
Document parse(const std::string& text, const std::string& source);

// Writes the mapping after `comment` (each of its lines prefixed by "# "): nested mappings
// indented two spaces, lists as "- item" lines, empty ones as {} and []. What is written reads back
// (with parse(), and with PyYAML, which Accelerate uses) as the same document: strings that would
// read back as something else (no, true, 3, 0x1f, 1:30, empty, '- x', '... x', ...) are
// single-quoted, as PyYAML does; strings holding a character not shown as it is (controls, tab,
// line breaks, a byte-order mark and the other invisible or format characters) are double-quoted
// with escapes ("\ufeff"); a key longer than 1024 bytes as written is an explicit key ("? key").
// Throws brisk::Error for a key or string that is not UTF-8, which no YAML file can hold.
std::string write(const Document& doc, const std::string& comment = "");

// The value for `key`, or nullptr.
const Value* find(const Document& doc, const std::string& key);

}  // namespace brisk::accelerate::yaml
