// Helpers shared by the CPU reduction kernels (reduce.cpp) and the along-one-dim kernels
// (softmax.cpp: softmax, cumsum, topk): accumulator types, checks, lane sums.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "brisk/core/tensor.h"
#include "brisk/kernels/dispatch.h"
#include "cpu/fast_math.h"

namespace brisk::kernels::cpu {

// Sum accumulator: f64 for f32/f64 (cheap and far more accurate), f32 for f16/bf16, i64 for
// integers and bool.
template <class T>
using sum_acc_t =
    std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<std::is_floating_point_v<T>, double, float>>;

// v converted to A through its own accumulation type (Half/BFloat16 go through float).
template <class A, class T>
inline A load(T v) {
  return static_cast<A>(static_cast<acc_t<T>>(v));
}

// Sum of a contiguous run with 8 independent lanes combined in a fixed order: the compiler
// can vectorise it, and the result depends only on n.
template <class S, class T>
inline S sum_lanes(const T* p, int64_t n) {
  constexpr int L = 8;
  S lane[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) lane[l] += load<S>(p[i + l]);
  S s = S(0);
  for (int l = 0; l < L; ++l) s += lane[l];
  for (; i < n; ++i) s += load<S>(p[i]);
  return s;
}

inline void require_float(const char* op, const Tensor& x) {
  BRISK_CHECK(x.is_floating_point(), op, ": expected a floating-point input, got ", dtype_name(x.dtype()), " of shape ",
              x.sizes());
}

// Wraps dim into [0, ndim) (a 0-dim tensor accepts 0 and -1); the error names op and shape.
inline int64_t wrap_dim_checked(const char* op, int64_t dim, const Tensor& x) {
  const int64_t nd = x.dim();
  const int64_t lo = nd == 0 ? -1 : -nd, hi = nd == 0 ? 0 : nd - 1;
  BRISK_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " out of range for input of shape ", x.sizes(), " (expected ",
              lo, "..", hi, ")");
  return dim < 0 ? dim + (nd == 0 ? 1 : nd) : dim;
}

}  // namespace brisk::kernels::cpu
