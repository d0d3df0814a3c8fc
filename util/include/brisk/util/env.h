// Exact parsing of the words brisk reads from the environment, config files and command lines, and
// environment-variable readers built on it: one spelling of a boolean and of an integer everywhere.
//
//   bool debug = envvar::get_bool("BRISK_DEBUG", false);       // TRUE, true, 1, yes, on ... all enable
//   int64_t port = envvar::get_int("MASTER_PORT", 29500, 1, 65535);
//
// An unset or empty variable gives the fallback; a value that does not parse (or is out of range)
// throws brisk::Error naming the variable, the value and what is accepted.
#pragma once
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace brisk {

// The accepted boolean spellings, for messages.
inline constexpr const char* kBoolWords = "1/0, true/false, yes/no, on/off (any case)";

// 1/0, true/false, yes/no, on/off in any case (TRUE, True, ...); anything else (also "") -> nullopt.
std::optional<bool> parse_bool_word(std::string_view s);

// A decimal integer of type T, exactly: optional sign ('-' only for signed types, '+' allowed), digits,
// nothing else (no spaces, "0x10", "1e3", "1.0"); out of T's range -> nullopt.
template <class T>
std::optional<T> parse_integer(std::string_view s) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  std::string_view digits = s;
  if (!digits.empty() && digits[0] == '+') {
    digits.remove_prefix(1);
    if (!digits.empty() && digits[0] == '-') return std::nullopt;
  }
  if (digits.empty()) return std::nullopt;
  T v{};
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 10);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return v;
}

// Parses an integer in [lo, hi]; throws brisk::Error "<what>: expected an integer in [lo, hi], got '<s>'".
int64_t parse_integer_in(std::string_view s, int64_t lo, int64_t hi, const std::string& what);

namespace envvar {

// Reads the environment (std::getenv, or `getenv` when given, for tests). Unset and empty are the same.
using Getenv = std::function<const char*(const char*)>;
std::optional<std::string> get(const char* name, const Getenv& getenv = nullptr);

// A boolean variable: the fallback when unset or empty; an invalid value throws naming the variable
// and the accepted spellings.
bool get_bool(const char* name, bool fallback, const Getenv& getenv = nullptr);
std::optional<bool> get_optional_bool(const char* name, const Getenv& getenv = nullptr);

// An integer variable in [lo, hi]: the fallback when unset or empty; anything else throws naming the
// variable, the value and the range.
int64_t get_int(const char* name, int64_t fallback, int64_t lo = std::numeric_limits<int64_t>::min(),
                int64_t hi = std::numeric_limits<int64_t>::max(), const Getenv& getenv = nullptr);
std::optional<int64_t> get_optional_int(const char* name, int64_t lo = std::numeric_limits<int64_t>::min(),
                                        int64_t hi = std::numeric_limits<int64_t>::max(),
                                        const Getenv& getenv = nullptr);

}  // namespace envvar
}  // namespace brisk
