// Exact parsing of booleans and integers, and the environment readers built on it.
#include "brisk/util/env.h"

#include <cstdlib>

#include "brisk/util/error.h"

namespace brisk {

std::optional<bool> parse_bool_word(std::string_view s) {
  if (s.size() > 5) return std::nullopt;
  std::string l;
  for (char c : s) l += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  return std::nullopt;
}

int64_t parse_integer_in(std::string_view s, int64_t lo, int64_t hi, const std::string& what) {
  const std::optional<int64_t> v = parse_integer<int64_t>(s);
  BRISK_CHECK(v && *v >= lo && *v <= hi, what, ": expected an integer in [", lo, ", ", hi, "], got '", std::string(s),
              "'");
  return *v;
}

namespace envvar {

std::optional<std::string> get(const char* name, const Getenv& getenv) {
  const char* v = getenv ? getenv(name) : std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<bool> get_optional_bool(const char* name, const Getenv& getenv) {
  const std::optional<std::string> v = get(name, getenv);
  if (!v) return std::nullopt;
  const std::optional<bool> b = parse_bool_word(*v);
  BRISK_CHECK(b.has_value(), "environment variable ", name, "='", *v, "' is not a boolean: expected ", kBoolWords);
  return b;
}

bool get_bool(const char* name, bool fallback, const Getenv& getenv) {
  return get_optional_bool(name, getenv).value_or(fallback);
}

std::optional<int64_t> get_optional_int(const char* name, int64_t lo, int64_t hi, const Getenv& getenv) {
  const std::optional<std::string> v = get(name, getenv);
  if (!v) return std::nullopt;
  const std::optional<int64_t> x = parse_integer<int64_t>(*v);
  BRISK_CHECK(x && *x >= lo && *x <= hi, "environment variable ", name, "='", *v, "' is not an integer in [", lo, ", ",
              hi, "]");
  return x;
}

int64_t get_int(const char* name, int64_t fallback, int64_t lo, int64_t hi, const Getenv& getenv) {
  return get_optional_int(name, lo, hi, getenv).value_or(fallback);
}

}  // namespace envvar
}  // namespace brisk
