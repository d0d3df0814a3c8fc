// Choices as enums instead of strings (a typo is a compile error, not a run-time one), and the
// one place where a string from a user (a flag, a config file, an environment variable) becomes
// one of them: parse_enum, whose error lists every valid spelling.
//   cross_entropy(logits, y, {.reduction = Reduction::Sum});
//   Reduction r = parse_enum<Reduction>(flag_value, "--reduction");
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace brisk {

// How a loss folds its per-element values: kept as they are, averaged, or summed.
enum class Reduction : uint8_t { None, Mean, Sum };
// GELU's form: the exact erf one, or the tanh approximation.
enum class GeluApproximation : uint8_t { None, Tanh };
// Autocast dtype of a training run: off, f16 (with loss scaling) or bf16.
enum class MixedPrecision : uint8_t { No, FP16, BF16 };
// Sharded data parallelism (docs/sharding.md): none (plain data parallel), ZeRO stages 1-3.
enum class Sharding : uint8_t { None, Zero1, Zero2, Zero3 };

// The spelling of each value, as users write it in flags and config files (PyTorch's words).
template <class E>
struct EnumNames;
template <>
struct EnumNames<Reduction> {
  static constexpr std::array<std::pair<std::string_view, Reduction>, 3> values{
      {{"none", Reduction::None}, {"mean", Reduction::Mean}, {"sum", Reduction::Sum}}};
};
template <>
struct EnumNames<GeluApproximation> {
  static constexpr std::array<std::pair<std::string_view, GeluApproximation>, 2> values{
      {{"none", GeluApproximation::None}, {"tanh", GeluApproximation::Tanh}}};
};
template <>
struct EnumNames<MixedPrecision> {
  static constexpr std::array<std::pair<std::string_view, MixedPrecision>, 3> values{
      {{"no", MixedPrecision::No}, {"fp16", MixedPrecision::FP16}, {"bf16", MixedPrecision::BF16}}};
};
template <>
struct EnumNames<Sharding> {
  static constexpr std::array<std::pair<std::string_view, Sharding>, 4> values{
      {{"none", Sharding::None}, {"zero1", Sharding::Zero1}, {"zero2", Sharding::Zero2}, {"zero3", Sharding::Zero3}}};
};

namespace detail {
// Throws brisk::Error: "<what>: '<got>' is not valid; expected one of: a, b, c".
[[noreturn]] void throw_bad_choice(std::string_view what, std::string_view got, const std::string_view* valid,
                                   size_t count);
}  // namespace detail

// The value spelled `text` (exactly, case-sensitive), or nullopt.
template <class E>
std::optional<E> try_parse_enum(std::string_view text) {
  for (const auto& [name, value] : EnumNames<E>::values)
    if (name == text) return value;
  return std::nullopt;
}

// The value spelled `text` (exactly, case-sensitive); `what` names the flag, key or argument.
template <class E>
E parse_enum(std::string_view text, std::string_view what) {
  constexpr auto& table = EnumNames<E>::values;
  for (const auto& [name, value] : table)
    if (name == text) return value;
  std::array<std::string_view, table.size()> names{};
  for (size_t i = 0; i < table.size(); ++i) names[i] = table[i].first;
  detail::throw_bad_choice(what, text, names.data(), names.size());
}

// The spelling of a value (what parse_enum accepts back).
template <class E>
std::string_view enum_name(E value) {
  for (const auto& [name, v] : EnumNames<E>::values)
    if (v == value) return name;
  return "?";
}

}  // namespace brisk
