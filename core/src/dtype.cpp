// DType names and promotion.
#include "brisk/core/dtype.h"

#include <string>

#include "brisk/util/error.h"

namespace brisk {

DType dtype_from_name(std::string_view name) {
  struct Alias {
    const char* name;
    DType t;
  };
  static constexpr Alias aliases[] = {
      {"f64", DType::F64},   {"float64", DType::F64}, {"double", DType::F64},    {"F64", DType::F64},
      {"f32", DType::F32},   {"float32", DType::F32}, {"float", DType::F32},     {"F32", DType::F32},
      {"f16", DType::F16},   {"float16", DType::F16}, {"half", DType::F16},      {"fp16", DType::F16},
      {"F16", DType::F16},   {"bf16", DType::BF16},   {"bfloat16", DType::BF16}, {"BF16", DType::BF16},
      {"i32", DType::I32},   {"int32", DType::I32},   {"I32", DType::I32},       {"i64", DType::I64},
      {"int64", DType::I64}, {"long", DType::I64},    {"I64", DType::I64},       {"u8", DType::U8},
      {"uint8", DType::U8},  {"U8", DType::U8},       {"bool", DType::Bool},     {"BOOL", DType::Bool},
  };
  for (const auto& a : aliases)
    if (name == a.name) return a.t;
  BRISK_THROW("dtype_from_name: unknown dtype '", std::string(name),
              "' (expected one of f64, f32, f16, bf16, i32, i64, u8, bool)");
}

static int rank_of(DType t) {
  switch (t) {
    case DType::Bool:
      return 0;
    case DType::U8:
      return 1;
    case DType::I32:
      return 2;
    case DType::I64:
      return 3;
    case DType::F16:
    case DType::BF16:
      return 4;
    case DType::F32:
      return 5;
    case DType::F64:
      return 6;
  }
  return 0;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
  return rank_of(a) >= rank_of(b) ? a : b;
}

}  // namespace brisk
