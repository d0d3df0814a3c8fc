// JSON value, strict recursive-descent parser (RFC 8259) and serde_json-compatible writer.
#include "brisk/util/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <new>

#include "brisk/util/error.h"

namespace brisk::json {

const char* type_name(Type t) {
  switch (t) {
    case Type::Null:
      return "null";
    case Type::Bool:
      return "bool";
    case Type::Number:
      return "number";
    case Type::String:
      return "string";
    case Type::Array:
      return "array";
    case Type::Object:
      return "object";
  }
  return "?";
}

Value::Value(uint64_t v) : type_(Type::Number) {
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    num_ = Num::Int;
    int_ = static_cast<int64_t>(v);
  } else {
    num_ = Num::UInt;
    uint_ = v;
  }
}

Value Value::array(Array items) {
  Value v;
  new (&v.arr_) Array(std::move(items));
  v.type_ = Type::Array;
  return v;
}

Value Value::object(Object items) {
  Value v;
  new (&v.obj_) Object(std::move(items));
  v.type_ = Type::Object;
  return v;
}

void Value::destroy() {
  switch (type_) {
    case Type::String:
      str_.~basic_string();
      break;
    case Type::Array:
      arr_.~Array();
      break;
    case Type::Object:
      obj_.~Object();
      break;
    default:
      break;
  }
  type_ = Type::Null;
  num_ = Num::Int;
  int_ = 0;
}

void Value::copy_from(const Value& o) {
  switch (o.type_) {
    case Type::Null:
      int_ = 0;
      break;
    case Type::Bool:
      bool_ = o.bool_;
      break;
    case Type::Number:
      if (o.num_ == Num::Int)
        int_ = o.int_;
      else if (o.num_ == Num::UInt)
        uint_ = o.uint_;
      else
        dbl_ = o.dbl_;
      break;
    case Type::String:
      new (&str_) std::string(o.str_);
      break;
    case Type::Array:
      new (&arr_) Array(o.arr_);
      break;
    case Type::Object:
      new (&obj_) Object(o.obj_);
      break;
  }
  num_ = o.num_;
  type_ = o.type_;  // last: if a copy above throws, *this stays null
}

void Value::move_from(Value&& o) {
  switch (o.type_) {
    case Type::String:
      new (&str_) std::string(std::move(o.str_));
      break;
    case Type::Array:
      new (&arr_) Array(std::move(o.arr_));
      break;
    case Type::Object:
      new (&obj_) Object(std::move(o.obj_));
      break;
    default:
      copy_from(o);
      return;
  }
  num_ = o.num_;
  type_ = o.type_;
}

Value::Value(const Value& o) : int_(0) {
  copy_from(o);
}
Value::Value(Value&& o) noexcept : int_(0) {
  move_from(std::move(o));
}
Value::~Value() {
  destroy();
}

Value& Value::operator=(const Value& o) {
  if (this != &o) {
    Value copy(o);  // first: o may live inside *this
    destroy();
    move_from(std::move(copy));
  }
  return *this;
}

Value& Value::operator=(Value&& o) noexcept {
  if (this != &o) {
    Value moved(std::move(o));  // first: o may live inside *this
    destroy();
    move_from(std::move(moved));
  }
  return *this;
}

void Value::check(Type t) const {
  BRISK_CHECK(type_ == t, "json: expected ", type_name(t), ", got ", type_name(type_));
}

bool Value::as_bool() const {
  check(Type::Bool);
  return bool_;
}
double Value::as_double() const {
  check(Type::Number);
  if (num_ == Num::Int) return static_cast<double>(int_);
  return num_ == Num::UInt ? static_cast<double>(uint_) : dbl_;
}
int64_t Value::as_int() const {
  check(Type::Number);
  BRISK_CHECK(num_ != Num::Double, "json: expected an integer, got ", dump());
  BRISK_CHECK(num_ == Num::Int, "json: integer ", uint_, " does not fit int64");
  return int_;
}
uint64_t Value::as_uint() const {
  check(Type::Number);
  BRISK_CHECK(num_ != Num::Double, "json: expected a non-negative integer, got ", dump());
  if (num_ == Num::UInt) return uint_;
  BRISK_CHECK(int_ >= 0, "json: expected a non-negative integer, got ", int_);
  return static_cast<uint64_t>(int_);
}
const std::string& Value::as_string() const {
  check(Type::String);
  return str_;
}
const Value::Array& Value::as_array() const {
  check(Type::Array);
  return arr_;
}
Value::Array& Value::as_array() {
  check(Type::Array);
  return arr_;
}
const Value::Object& Value::items() const {
  check(Type::Object);
  return obj_;
}
Value::Object& Value::items() {
  check(Type::Object);
  return obj_;
}

size_t Value::size() const {
  if (type_ == Type::Array) return arr_.size();
  if (type_ == Type::Object) return obj_.size();
  return 0;
}

const Value& Value::at(size_t i) const {
  check(Type::Array);
  BRISK_CHECK(i < arr_.size(), "json: index ", i, " out of range for an array of ", arr_.size());
  return arr_[i];
}

void Value::push_back(Value v) {
  if (type_ == Type::Null) {
    new (&arr_) Array();
    type_ = Type::Array;
  }
  check(Type::Array);
  arr_.push_back(std::move(v));
}

const Value* Value::find(std::string_view key) const {
  check(Type::Object);
  for (const auto& [k, v] : obj_)
    if (k == key) return &v;
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  const Value* v = find(key);
  BRISK_CHECK(v != nullptr, "json: no key \"", std::string(key), "\"");
  return *v;
}

Value& Value::operator[](std::string_view key) {
  if (type_ == Type::Null) {
    new (&obj_) Object();
    type_ = Type::Object;
  }
  check(Type::Object);
  for (auto& [k, v] : obj_)
    if (k == key) return v;
  obj_.emplace_back(std::string(key), Value());
  return obj_.back().second;
}

bool operator==(const Value& a, const Value& b) {
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case Type::Null:
      return true;
    case Type::Bool:
      return a.bool_ == b.bool_;
    case Type::Number:
      if (a.is_integer() && b.is_integer()) {
        if (a.num_ != b.num_) return false;  // one is above int64's range, the other is not
        return a.num_ == Value::Num::Int ? a.int_ == b.int_ : a.uint_ == b.uint_;
      }
      return a.as_double() == b.as_double();
    case Type::String:
      return a.str_ == b.str_;
    case Type::Array:
      return a.arr_ == b.arr_;
    case Type::Object:
      return a.obj_ == b.obj_;
  }
  return false;
}

// --- writer ---------------------------------------------------------------------

void write_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string quote(std::string_view s) {
  std::string out;
  write_string(out, s);
  return out;
}

void Value::dump_to(std::string& out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(d), ' ');
  };
  switch (type_) {
    case Type::Null:
      out += "null";
      break;
    case Type::Bool:
      out += bool_ ? "true" : "false";
      break;
    case Type::Number: {
      char buf[64];
      if (num_ == Num::Int) {
        out.append(buf, std::to_chars(buf, buf + sizeof buf, int_).ptr);
      } else if (num_ == Num::UInt) {
        out.append(buf, std::to_chars(buf, buf + sizeof buf, uint_).ptr);
      } else if (!std::isfinite(dbl_)) {
        out += "null";
      } else {
        const char* end = std::to_chars(buf, buf + sizeof buf, dbl_).ptr;
        std::string_view text(buf, static_cast<size_t>(end - buf));
        out += text;
        // Keep doubles recognisable as such on the way back ("1.0", not "1").
        if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
      }
      break;
    }
    case Type::String:
      write_string(out, str_);
      break;
    case Type::Array:
      out += '[';
      for (size_t i = 0; i < arr_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        arr_[i].dump_to(out, indent, depth + 1);
      }
      if (!arr_.empty()) newline(depth);
      out += ']';
      break;
    case Type::Object:
      out += '{';
      for (size_t i = 0; i < obj_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        write_string(out, obj_[i].first);
        out += indent < 0 ? ":" : ": ";
        obj_[i].second.dump_to(out, indent, depth + 1);
      }
      if (!obj_.empty()) newline(depth);
      out += '}';
      break;
  }
}

std::string Value::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

// --- UTF-8 ------------------------------------------------------------------------

bool valid_utf8(std::string_view s, size_t* bad_at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  auto fail = [&](size_t at) {
    if (bad_at) *bad_at = at;
    return false;
  };
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return fail(i);
    if (i + len > n) return fail(i);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return fail(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return fail(i);
    i += len;
  }
  return true;
}

// --- parser -----------------------------------------------------------------------

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

Reader::Reader(std::string_view text, const ParseOptions& options) : s_(text), opt_(options) {}

void Reader::fail(const std::string& what, size_t at) const {
  if (at == std::string_view::npos) at = pos_;
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < s_.size(); ++i) {
    if (s_[i] == '\n')
      ++line, col = 1;
    else
      ++col;
  }
  BRISK_THROW("json: ", what, " at line ", line, ", column ", col, " (byte ", at, ")");
}

void Reader::skip_ws() {
  while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
}

void Reader::start_value() {
  skip_ws();
  if (open_.size() > static_cast<size_t>(std::max(opt_.max_depth, 0)))
    fail("nesting deeper than " + std::to_string(opt_.max_depth));
  if (at_end()) fail("unexpected end of input");
}

void Reader::expect_word(std::string_view w) {
  if (s_.substr(pos_, w.size()) != w) fail("invalid literal (expected " + std::string(w) + ")");
  pos_ += w.size();
}

Type Reader::next_type() {
  start_value();
  switch (peek()) {
    case '{':
      return Type::Object;
    case '[':
      return Type::Array;
    case '"':
      return Type::String;
    case 't':
    case 'f':
      return Type::Bool;
    case 'n':
      return Type::Null;
    default:
      if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return Type::Number;
      fail(std::string("unexpected character '") + peek() + "'");
  }
}

void Reader::begin_object() {
  if (next_type() != Type::Object) fail("expected an object");
  ++pos_;
  open_.push_back(1);
}

bool Reader::next_key(std::string& key) {
  skip_ws();
  if (open_.empty()) fail("next_key outside an object");
  if (open_.back()) {
    open_.back() = 0;
    if (peek() == '}') {
      ++pos_;
      open_.pop_back();
      return false;
    }
  } else if (peek() == ',') {
    ++pos_;
    skip_ws();
  } else if (peek() == '}') {
    ++pos_;
    open_.pop_back();
    return false;
  } else {
    fail(at_end() ? "unexpected end of input in an object" : "expected ',' or '}' in an object");
  }
  if (peek() != '"') fail(at_end() ? "unexpected end of input in an object" : "expected a string key");
  key_at_ = pos_;
  key.clear();
  read_string(key);
  skip_ws();
  if (peek() != ':') fail("expected ':' after an object key");
  ++pos_;
  return true;
}

void Reader::begin_array() {
  if (next_type() != Type::Array) fail("expected an array");
  ++pos_;
  open_.push_back(1);
}

bool Reader::next_element() {
  skip_ws();
  if (open_.empty()) fail("next_element outside an array");
  if (open_.back()) {
    open_.back() = 0;
    if (peek() == ']') {
      ++pos_;
      open_.pop_back();
      return false;
    }
    return true;
  }
  if (peek() == ',') {
    ++pos_;
    return true;
  }
  if (peek() == ']') {
    ++pos_;
    open_.pop_back();
    return false;
  }
  fail(at_end() ? "unexpected end of input in an array" : "expected ',' or ']' in an array");
}

uint32_t Reader::parse_hex4() {
  if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    const char c = s_[pos_++];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= static_cast<uint32_t>(c - 'A' + 10);
    else
      fail("bad hex digit in a \\u escape", pos_ - 1);
  }
  return v;
}

std::string Reader::read_string() {
  std::string out;
  read_string(out);
  return out;
}

void Reader::read_string(std::string& out) {
  if (next_type() != Type::String) fail("expected a string");
  const size_t start = pos_;
  ++pos_;  // opening quote
  for (;;) {
    if (at_end()) fail("unterminated string", start);
    const auto c = static_cast<unsigned char>(s_[pos_]);
    if (c == '"') {
      ++pos_;
      return;
    }
    if (c < 0x20) fail("unescaped control character in a string");
    if (c == '\\') {
      ++pos_;
      if (at_end()) fail("unterminated string", start);
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          const size_t esc_at = pos_ - 2;
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") fail("unpaired surrogate in a \\u escape", esc_at);
            pos_ += 2;
            const uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate in a \\u escape", esc_at);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate in a \\u escape", esc_at);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("invalid escape '\\") + e + "'", pos_ - 2);
      }
      continue;
    }
    // A run of raw bytes: must be valid UTF-8.
    size_t end = pos_;
    while (end < s_.size() && s_[end] != '"' && s_[end] != '\\' && static_cast<unsigned char>(s_[end]) >= 0x20) ++end;
    size_t bad = 0;
    if (!valid_utf8(s_.substr(pos_, end - pos_), &bad)) fail("invalid UTF-8 in a string", pos_ + bad);
    out.append(s_.substr(pos_, end - pos_));
    pos_ = end;
  }
}

Value Reader::read_number() {
  const size_t start = pos_;
  const bool is_int = scan_number();
  const char* b = s_.data() + start;
  const char* e = s_.data() + pos_;
  if (is_int) {
    if (*b == '-') {
      int64_t v = 0;
      if (std::from_chars(b, e, v).ec == std::errc()) return Value(v);
    } else {
      uint64_t v = 0;
      if (std::from_chars(b, e, v).ec == std::errc()) return Value(v);
    }
  }
  double d = 0;
  const auto r = std::from_chars(b, e, d);
  if (r.ec == std::errc::result_out_of_range) fail("number out of range", start);
  if (r.ec != std::errc() || r.ptr != e) fail("malformed number", start);
  return Value(d);
}

void Reader::skip_number() {
  const size_t start = pos_;
  // Integers of up to 18 characters always fit int64; anything else is checked as read_number does.
  if (scan_number() && pos_ - start <= 18) return;
  pos_ = start;
  read_number();
}

bool Reader::scan_number() {
  const size_t start = pos_;
  if (peek() == '-') ++pos_;
  auto digits = [&] {
    const size_t d0 = pos_;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    return pos_ - d0;
  };
  if (peek() == '0') {
    ++pos_;
    if (peek() >= '0' && peek() <= '9') fail("leading zero in a number", start);
  } else if (digits() == 0) {
    fail("expected a digit", pos_);
  }
  bool is_int = true;
  if (peek() == '.') {
    ++pos_;
    is_int = false;
    if (digits() == 0) fail("expected a digit after '.'");
  }
  if (peek() == 'e' || peek() == 'E') {
    ++pos_;
    is_int = false;
    if (peek() == '+' || peek() == '-') ++pos_;
    if (digits() == 0) fail("expected a digit in the exponent");
  }
  return is_int;
}

Value Reader::read_value() {
  switch (next_type()) {
    case Type::Null:
      expect_word("null");
      return Value();
    case Type::Bool:
      if (peek() == 't') {
        expect_word("true");
        return Value(true);
      }
      expect_word("false");
      return Value(false);
    case Type::Number:
      return read_number();
    case Type::String:
      return Value(read_string());
    case Type::Array: {
      Value arr = Value::array();
      begin_array();
      while (next_element()) arr.push_back(read_value());
      return arr;
    }
    case Type::Object: {
      Value obj = Value::object();
      Value::Object& items = obj.items();
      std::vector<size_t> key_at;  // for the duplicate-key error's position
      begin_object();
      std::string key;
      while (next_key(key)) {
        key_at.push_back(key_offset());
        Value v = read_value();
        items.emplace_back(std::move(key), std::move(v));
      }
      if (!opt_.allow_duplicate_keys && items.size() > 1) {
        // Sort the keys' indices (stable: document order among equal keys) and report the
        // duplicate that comes first in the text: O(n log n), where comparing every pair was O(n^2).
        std::vector<uint32_t> order(items.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
        std::stable_sort(order.begin(), order.end(),
                         [&](uint32_t a, uint32_t b) { return items[a].first < items[b].first; });
        size_t first_dup = items.size();
        for (size_t i = 1; i < order.size(); ++i)
          if (items[order[i]].first == items[order[i - 1]].first) first_dup = std::min<size_t>(first_dup, order[i]);
        if (first_dup < items.size()) fail("duplicate key \"" + items[first_dup].first + "\"", key_at[first_dup]);
      }
      return obj;
    }
  }
  fail("unexpected value");
}

void Reader::skip_value() {
  switch (next_type()) {
    case Type::Array:
      begin_array();
      while (next_element()) skip_value();
      return;
    case Type::Object: {
      begin_object();
      std::string key;
      while (next_key(key)) skip_value();
      return;
    }
    case Type::String: {
      std::string ignored;
      read_string(ignored);
      return;
    }
    case Type::Number:
      skip_number();
      return;
    default:
      read_value();
      return;
  }
}

void Reader::finish() {
  skip_ws();
  if (pos_ != s_.size()) fail("unexpected text after the value");
}

Value parse(std::string_view text, const ParseOptions& options) {
  Reader r(text, options);
  Value v = r.read_value();
  r.finish();
  return v;
}

}  // namespace brisk::json
