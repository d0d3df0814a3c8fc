// Vectorisable math for the CPU kernels (internal): an f32 exp without a libm call, so loops over
// it vectorise (std::exp does not without -ffast-math).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpu/isa.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

// exp(x) for x in [-87.33654, 88] (no range checks): 2^k * p(r) with |r| <= ln2/2 and Cephes'
// degree-6 polynomial, within 2 ulp of std::exp.
[[gnu::always_inline]] inline float exp_f32_core(float xc) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23 rounds to integers
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
  return p * std::bit_cast<float>((k + 127) << 23);
}

// exp(x) for f32 without a libm call, so loops over it vectorise: 2^k * p(r) with |r| <= ln2/2
// and Cephes' degree-6 polynomial (within 2 ulp of std::exp). Exact 0 below -87.33 (where the
// true value is subnormal) and +inf above 88; NaN stays NaN.
[[gnu::always_inline]] inline float exp_f32(float x) {
  constexpr float kLo = -87.33654f, kHi = 88.0f;
  const float y = exp_f32_core(std::min(std::max(x, kLo), kHi));
  return x < kLo ? 0.0f : x > kHi ? std::numeric_limits<float>::infinity() : y;
}

// tanh(x) for f32 without a libm call (glibc's tanhf is a call of ~15 ns per element that no loop
// vectorises; GELU's tanh form spent most of its time there). Cephes' tanhf: for |x| < 0.625 the
// odd polynomial x + x^3 P(x^2), else 1 - 2 / (exp(2|x|) + 1) with x's sign; both are computed
// and one selected, so a loop over it has no branch (it vectorises when the compiler may assume
// floating-point operations do not trap: the kernels are built with -fno-trapping-math, which
// changes no result). Within 3 ulp of the exact value (1 ulp measured over [-12, 12]); exactly
// +-1 for |x| > 9.02, as tanhf; NaN stays NaN.
[[gnu::always_inline]] inline float tanh_f32(float x) {
  const float a = std::abs(x);  // computed on |x|, x's sign put back last (so tanh(-0) = -0)
  const float z = a * a;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = a + a * z * p;
  const float two_a = 2.0f * a < 88.0f ? 2.0f * a : 88.0f;  // exp stays finite: 1 - tiny rounds to 1
  const float big = 1.0f - 2.0f / (exp_f32_core(two_a) + 1.0f);
  const float r = a < 0.625f ? small : big;
  const float signed_r = std::bit_cast<float>(std::bit_cast<uint32_t>(r) | (std::bit_cast<uint32_t>(x) & 0x80000000u));
  return x != x ? x : signed_r;
}

// tanh in the accumulation type: the vectorisable f32 version, std::tanh for f64.
template <class A>
[[gnu::always_inline]] inline A fast_tanh(A x) {
  if constexpr (std::is_same_v<A, float>)
    return tanh_f32(x);
  else
    return std::tanh(x);
}

// exp in the accumulation type: the vectorisable f32 version, std::exp for f64.
template <class A>
[[gnu::always_inline]] inline A fast_exp(A x) {
  if constexpr (std::is_same_v<A, float>)
    return exp_f32(x);
  else
    return std::exp(x);
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
