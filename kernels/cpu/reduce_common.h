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

// exp(x) for f32 without a libm call, so loops over it vectorise: 2^k * p(r) with |r| <= ln2/2
// and Cephes' degree-6 polynomial (within 2 ulp of std::exp). Exact 0 below -87.33 (where the
// true value is subnormal) and +inf above 88; NaN stays NaN.
inline float exp_f32(float x) {
  constexpr float kLo = -87.33654f, kHi = 88.0f, kMagic = 12582912.0f;  // 1.5 * 2^23 rounds to integers
  const float xc = std::min(std::max(x, kLo), kHi);
  const float kf = xc * 1.44269504088896341f + kMagic;
  const int32_t k = std::bit_cast<int32_t>(kf) - std::bit_cast<int32_t>(kMagic);
  const float kr = kf - kMagic;
  float r = xc - kr * 0.693359375f;
  r = r + kr * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float y = p * std::bit_cast<float>((k + 127) << 23);
  return x < kLo ? 0.0f : x > kHi ? std::numeric_limits<float>::infinity() : y;
}

// exp in the accumulation type: the vectorisable f32 version, std::exp for f64.
template <class A>
inline A fast_exp(A x) {
  if constexpr (std::is_same_v<A, float>)
    return exp_f32(x);
  else
    return std::exp(x);
}

inline void require_cpu(const char* op, const Tensor& x) {
  if (!x.device().is_cpu()) throw_not_implemented(op, x.dtype(), x.device());
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
