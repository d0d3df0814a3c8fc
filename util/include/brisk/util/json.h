// A compact JSON value (null, bool, number, string, array, object with keys in insertion
// order), a strict parser whose errors give line, column and byte offset, and a writer
// whose compact form matches serde_json's (no spaces), as safetensors headers need.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace brisk::json {

enum class Type { Null, Bool, Number, String, Array, Object };
const char* type_name(Type t);

class Value {
 public:
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;  // keys in insertion order

  Value() : int_(0) {}  // null
  Value(std::nullptr_t) : int_(0) {}
  Value(bool b) : type_(Type::Bool), bool_(b) {}
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v) : type_(Type::Number), num_(Num::Int), int_(v) {}
  Value(uint64_t v);
  Value(double v) : type_(Type::Number), num_(Num::Double), dbl_(v) {}
  Value(const char* s) : type_(Type::String), str_(s) {}
  Value(std::string s) : type_(Type::String), str_(std::move(s)) {}
  Value(std::string_view s) : type_(Type::String), str_(s) {}
  static Value array(Array items = {});
  static Value object(Object items = {});
  Value(const Value& o);
  Value(Value&& o) noexcept;
  Value& operator=(const Value& o);
  Value& operator=(Value&& o) noexcept;
  ~Value();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  // A number written without fraction or exponent that fits int64 / uint64.
  bool is_integer() const { return type_ == Type::Number && num_ != Num::Double; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Typed access; each throws brisk::Error naming the expected and actual type.
  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;    // integers in int64 range only
  uint64_t as_uint() const;  // non-negative integers only
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& items() const;
  Object& items();

  // Arrays and objects: element count (0 for scalars).
  size_t size() const;
  const Value& at(size_t i) const;
  template <std::integral I>  // a template so that v[0] does not also match the string_view key
  const Value& operator[](I i) const {
    return at(static_cast<size_t>(i));
  }
  template <std::integral I>
  const Value& operator[](I i) {
    return at(static_cast<size_t>(i));
  }
  void push_back(Value v);
  // Objects: lookup (nullptr when absent), checked lookup, insert-or-assign.
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const Value& at(std::string_view key) const;
  Value& operator[](std::string_view key);  // null inserted when absent (a null becomes an object)
  void set(std::string_view key, Value v) { (*this)[key] = std::move(v); }

  // Compact (indent < 0: `{"a":1,"b":[true,null]}`) or pretty-printed with `indent` spaces.
  // Non-ASCII text is written as UTF-8; NaN and infinities (not JSON) are written as null.
  std::string dump(int indent = -1) const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  enum class Num : uint8_t { Int, UInt, Double };
  Type type_ = Type::Null;
  Num num_ = Num::Int;
  // Only the member that type_ (and num_) name is alive: a value costs 40 bytes, not the ~120 of
  // all of them side by side (parsed documents hold one per number, string, array and object).
  union {
    bool bool_;
    int64_t int_;
    uint64_t uint_;
    double dbl_;
    std::string str_;
    Array arr_;
    Object obj_;
  };
  void destroy();                  // ends the live member; the value becomes null
  void copy_from(const Value& o);  // *this holds no live non-trivial member
  void move_from(Value&& o);       // *this holds no live non-trivial member
  void check(Type t) const;
  void dump_to(std::string& out, int indent, int depth) const;
};

struct ParseOptions {
  // Duplicate object keys are an error unless allowed (then all are kept, in order).
  bool allow_duplicate_keys = false;
  int max_depth = 512;
};
// Parses exactly one JSON value (surrounding whitespace allowed). Errors throw brisk::Error:
// "json: <what> at line L, column C (byte B)". Time is linear in the text's length (duplicate
// keys are found by sorting, not by comparing every pair).
Value parse(std::string_view text, const ParseOptions& options = {});

// A pull parser over one JSON text with parse()'s grammar, limits and errors that keeps nothing
// itself: a reader of large untrusted documents (a safetensors header) walks the values and holds
// only what it keeps, so its memory is bounded by that. Typical use:
//   Reader r(text);
//   r.begin_object();
//   for (std::string key; r.next_key(key);) { if (r.next_type() == Type::String) ... else r.skip_value(); }
//   r.finish();
class Reader {
 public:
  explicit Reader(std::string_view text, const ParseOptions& options = {});
  // The type of the value that comes next (throws if none can start here).
  Type next_type();
  // Objects: begin_object(), then `while (next_key(key))` reads one value per key; next_key
  // returns false, having consumed the '}', at the end. Keys are not checked for duplicates.
  void begin_object();
  bool next_key(std::string& key);
  size_t key_offset() const { return key_at_; }  // where the last key began
  // Arrays: begin_array(), then `while (next_element())` reads one value per element.
  void begin_array();
  bool next_element();
  void read_string(std::string& out);
  std::string read_string();
  // The next value (of any type) as a tree; objects check duplicate keys unless allowed.
  Value read_value();
  void skip_value();
  // Only whitespace may follow the value.
  void finish();
  size_t offset() const { return pos_; }
  std::string_view text() const { return s_; }
  // Throws "json: <what> at line L, column C (byte B)" for offset `at` (default: the current one).
  [[noreturn]] void fail(const std::string& what, size_t at = std::string_view::npos) const;

 private:
  std::string_view s_;
  ParseOptions opt_;
  size_t pos_ = 0, key_at_ = 0;
  std::vector<char> open_;  // per open container: 1 before its first element, else 0
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void skip_ws();
  void start_value();
  void expect_word(std::string_view w);
  Value read_number();
  void skip_number();
  bool scan_number();  // moves past a number's text (checking its grammar); true if it is integral
  uint32_t parse_hex4();
};

// Whether `s` is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF);
// on failure *bad_at is the offset of the first bad byte.
bool valid_utf8(std::string_view s, size_t* bad_at = nullptr);
// Appends `s` as a JSON string literal (quotes and escapes as serde_json writes them).
void write_string(std::string& out, std::string_view s);
// `s` as a JSON string literal: how error messages show a token or key exactly.
std::string quote(std::string_view s);

}  // namespace brisk::json
