// DType: the element types brisk stores, with one constexpr traits table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "brisk/core/half.h"

namespace brisk {

enum class DType : uint8_t { F64, F32, F16, BF16, I32, I64, U8, Bool };
inline constexpr int kNumDTypes = 8;

struct DTypeTraits {
  DType dtype;
  const char* name;              // PyTorch-style short name: "f32", "bf16", ...
  const char* safetensors_name;  // "F32", "BF16", ...
  size_t size;
  bool is_float;
  bool is_signed;
};

inline constexpr DTypeTraits kDTypeTable[kNumDTypes] = {
    {DType::F64, "f64", "F64", 8, true, true},  {DType::F32, "f32", "F32", 4, true, true},
    {DType::F16, "f16", "F16", 2, true, true},  {DType::BF16, "bf16", "BF16", 2, true, true},
    {DType::I32, "i32", "I32", 4, false, true}, {DType::I64, "i64", "I64", 8, false, true},
    {DType::U8, "u8", "U8", 1, false, false},   {DType::Bool, "bool", "BOOL", 1, false, false},
};

constexpr const DTypeTraits& traits(DType t) {
  return kDTypeTable[static_cast<int>(t)];
}
constexpr size_t dtype_size(DType t) {
  return traits(t).size;
}
constexpr const char* dtype_name(DType t) {
  return traits(t).name;
}
constexpr bool is_floating(DType t) {
  return traits(t).is_float;
}
// Names accepted: "f32", "float32", "F32" ... (throws brisk::Error otherwise).
DType dtype_from_name(std::string_view name);
inline std::ostream& operator<<(std::ostream& os, DType t) {
  return os << dtype_name(t);
}

// The type an op returns when mixing two dtypes (PyTorch's promotion lattice, simplified:
// bool < u8 < i32 < i64 < f16/bf16 < f32 < f64; f16 with bf16 gives f32).
DType promote_types(DType a, DType b);

// C++ type <-> DType.
template <class T>
struct dtype_of;
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = DType::F16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::BF16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::I64;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::U8;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Accumulation type: 16-bit floats compute in float.
template <class T>
struct acc_type {
  using type = T;
};
template <>
struct acc_type<Half> {
  using type = float;
};
template <>
struct acc_type<BFloat16> {
  using type = float;
};
template <class T>
using acc_t = typename acc_type<T>::type;

}  // namespace brisk
