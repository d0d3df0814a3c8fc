// Vectorisable math for the CPU kernels (internal): an f32 exp without a libm call, so loops over
// it vectorise (std::exp does not without -ffast-math).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace brisk::kernels::cpu {

// exp(x) for f32 without a libm call, so loops over it vectorise: 2^k * p(r) with |r| <= ln2/2
// and Cephes' degree-6 polynomial (within 2 ulp of std::exp). Exact 0 below -87.33 (where the
// true value is subnormal) and +inf above 88; NaN stays NaN.
[[gnu::always_inline]] inline float exp_f32(float x) {
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
[[gnu::always_inline]] inline A fast_exp(A x) {
  if constexpr (std::is_same_v<A, float>)
    return exp_f32(x);
  else
    return std::exp(x);
}

}  // namespace brisk::kernels::cpu
