// The per-element draws of the random factories (uniform_, normal_, randint), written once for
// host and device: the CPU factories and the CUDA kernels call the same functions, so a seed and
// offset give bit-identical values on every device. Element i of a draw uses Philox block
// (seed, base + i) (base: the counters Generator::reserve handed out), so the values do not
// depend on the thread count or the launch shape either.
//
// Bit-identical needs every operation rounded the same way on both sides. A product that feeds
// a sum is either fused explicitly (fma(), one rounding everywhere) or kept apart (Strict, two
// roundings everywhere): left to the compilers, nvcc fuses a * b + c and GCC does too in C++ for
// an FMA target (-march=native), each where it sees fit. libm is not used either, since glibc's
// and CUDA's last bits differ: normal_ has its own log and cos (fdlibm's polynomials; within 1
// and 2 ulp of the exact values), built from IEEE +, -, *, / and sqrt only.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "brisk/core/macros.h"
#include "brisk/core/rng.h"
#include "brisk/kernels/device/pointwise.h"

namespace brisk::kernels::device {

// a * b rounded to double and never fused into a following addition. On the device the _rn
// intrinsic is never fused; on the host an empty asm makes the product opaque to the compiler's
// contraction pass (it costs no instruction).
BRISK_HOST_DEVICE inline double unfused_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  double p = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#else
  volatile double opaque = p;
  p = opaque;
#endif
  return p;
#endif
}

// a * b + c with one rounding, on host and device alike (an FMA instruction, or glibc's exact
// software fma on a host without one).
BRISK_HOST_DEVICE inline double fused_mul_add(double a, double b, double c) {
  return ::fma(a, b, c);
}

// A double whose every operation is rounded on its own, on host and device alike (products are
// never fused into sums), so code written with it computes the same bits on both.
struct Strict {
  double v;
  BRISK_HOST_DEVICE constexpr Strict(double x) : v(x) {}  // NOLINT: implicit, so constants mix in
};
BRISK_HOST_DEVICE inline Strict operator*(Strict a, Strict b) {
  return unfused_mul(a.v, b.v);
}
BRISK_HOST_DEVICE inline Strict operator+(Strict a, Strict b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a.v, b.v);
#else
  return a.v + b.v;
#endif
}
BRISK_HOST_DEVICE inline Strict operator-(Strict a, Strict b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a.v, b.v);
#else
  return a.v - b.v;
#endif
}
BRISK_HOST_DEVICE inline Strict operator/(Strict a, Strict b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a.v, b.v);
#else
  return a.v / b.v;
#endif
}
BRISK_HOST_DEVICE inline Strict operator-(Strict a) {
  return -a.v;
}

BRISK_HOST_DEVICE inline uint64_t double_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}
BRISK_HOST_DEVICE inline double double_from_bits(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

// log(x) for a positive, finite, normal double (fdlibm's __ieee754_log: x = 2^k (1 + f) with
// 1 + f in [sqrt(2)/2, sqrt(2)), log(1 + f) = 2 atanh(f / (2 + f)) by a minimax polynomial; within
// 1 ulp). The Box-Muller radius only takes x in (0, 1], whose smallest value is 2^-53.
BRISK_HOST_DEVICE inline double portable_log(double xd) {
  constexpr double ln2_hi = 6.93147180369123816490e-01;  // 3fe62e42 fee00000
  constexpr double ln2_lo = 1.90821492927058770002e-10;  // 3dea39ef 35793c76
  constexpr double Lg1 = 6.666666666666735130e-01;       // 3fe55555 55555593
  constexpr double Lg2 = 3.999999999940941908e-01;       // 3fd99999 9997fa04
  constexpr double Lg3 = 2.857142874366239149e-01;       // 3fd24924 94229359
  constexpr double Lg4 = 2.222219843214978396e-01;       // 3fcc71c5 1d8e78af
  constexpr double Lg5 = 1.818357216161805012e-01;       // 3fc74664 96cb03de
  constexpr double Lg6 = 1.531383769920937332e-01;       // 3fc39a09 d078c69f
  constexpr double Lg7 = 1.479819860511658591e-01;       // 3fc2f112 df3e5244
  const uint64_t bits = double_bits(xd);
  int32_t hx = static_cast<int32_t>(bits >> 32);
  int32_t k = (hx >> 20) - 1023;
  hx &= 0x000fffff;
  int32_t i = (hx + 0x95f64) & 0x100000;
  // Scale into [sqrt(2)/2, sqrt(2)): x or x/2, keeping the low word.
  const Strict x = double_from_bits((static_cast<uint64_t>(static_cast<uint32_t>(hx | (i ^ 0x3ff00000))) << 32) |
                                    (bits & 0xffffffffu));
  k += i >> 20;
  const Strict f = x - 1.0;
  const Strict dk = static_cast<double>(k);
  if ((0x000fffff & (2 + hx)) < 3) {  // -2^-20 <= f < 2^-20
    if (f.v == 0.0) return k == 0 ? 0.0 : (dk * ln2_hi + dk * ln2_lo).v;
    const Strict R = f * f * (Strict(0.5) - Strict(0.33333333333333333) * f);
    if (k == 0) return (f - R).v;
    return (dk * ln2_hi - ((R - dk * ln2_lo) - f)).v;
  }
  const Strict s = f / (Strict(2.0) + f);
  const Strict z = s * s;
  i = hx - 0x6147a;
  const Strict w = z * z;
  const int32_t j = 0x6b851 - hx;
  const Strict t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const Strict t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  i |= j;
  const Strict R = t2 + t1;
  if (i > 0) {
    const Strict hfsq = Strict(0.5) * f * f;
    if (k == 0) return (f - (hfsq - s * (hfsq + R))).v;
    return (dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f)).v;
  }
  if (k == 0) return (f - s * (f - R)).v;
  return (dk * ln2_hi - ((s * (f - R) - dk * ln2_lo) - f)).v;
}

// sin(x) and cos(x) for |x| <= pi/4 (fdlibm's __kernel_sin / __kernel_cos with no tail).
BRISK_HOST_DEVICE inline double kernel_sin(double xd) {
  constexpr double S1 = -1.66666666666666324348e-01;  // bfc55555 55555549
  constexpr double S2 = 8.33333333332248946124e-03;   // 3f811111 1110f8a6
  constexpr double S3 = -1.98412698298579493134e-04;  // bf2a01a0 19c161d5
  constexpr double S4 = 2.75573137070700676789e-06;   // 3ec71de3 57b1fe7d
  constexpr double S5 = -2.50507602534068634195e-08;  // be5ae5e6 8a2b9ceb
  constexpr double S6 = 1.58969099521155010221e-10;   // 3de5d93a 5acfd57c
  const int32_t ix = static_cast<int32_t>(double_bits(xd) >> 32) & 0x7fffffff;
  if (ix < 0x3e400000) return xd;  // |x| < 2^-27: sin x = x to double precision
  const Strict x = xd;
  const Strict z = x * x;
  const Strict v = z * x;
  const Strict r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
  return (x + v * (S1 + z * r)).v;
}
BRISK_HOST_DEVICE inline double kernel_cos(double xd) {
  constexpr double C1 = 4.16666666666666019037e-02;   // 3fa55555 5555554c
  constexpr double C2 = -1.38888888888741095749e-03;  // bf56c16c 16c15177
  constexpr double C3 = 2.48015872894767294178e-05;   // 3efa01a0 19cb1590
  constexpr double C4 = -2.75573143513906633035e-07;  // be927e4f 809c52ad
  constexpr double C5 = 2.08757232129817482790e-09;   // 3e21ee9e bdb4b1c4
  constexpr double C6 = -1.13596475577881948265e-11;  // bda8fae9 be8838d4
  const int32_t ix = static_cast<int32_t>(double_bits(xd) >> 32) & 0x7fffffff;
  if (ix < 0x3e400000) return 1.0;  // |x| < 2^-27: cos x = 1 to double precision
  const Strict x = xd;
  const Strict z = x * x;
  const Strict r = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
  if (ix < 0x3fd33333) return (Strict(1.0) - (Strict(0.5) * z - z * r)).v;  // |x| < 0.3
  // 1 - x^2/2 loses bits to cancellation: subtract x/4 (or 0.28125) exactly first.
  const Strict qx = ix > 0x3fe90000 ? 0.28125 : double_from_bits(static_cast<uint64_t>(ix - 0x00200000) << 32);
  const Strict hz = Strict(0.5) * z - qx;
  const Strict a = Strict(1.0) - qx;
  return (a - (hz - z * r)).v;
}

// cos(2 pi u) for u in [0, 1]: u is cut exactly into quarter turns q/4 and a remainder r with
// |r| <= 1/8 (u - q/4 is exact: both lie on u's grid and are within a factor 2 of each other),
// so the only rounding before the polynomial is x = 2 pi r.
BRISK_HOST_DEVICE inline double cos_two_pi(double u) {
  constexpr double kTwoPi = 6.283185307179586;  // 401921fb 54442d18
  const int q = static_cast<int>((Strict(u) * 4.0 + 0.5).v);
  const double x = ((Strict(u) - Strict(q) * 0.25) * kTwoPi).v;
  switch (q & 3) {
    case 0:
      return kernel_cos(x);
    case 1:
      return -kernel_sin(x);
    case 2:
      return -kernel_cos(x);
    default:
      return kernel_sin(x);
  }
}

// The bits of one Philox block as a 64-bit integer (words 0 and 1).
BRISK_HOST_DEVICE inline uint64_t philox_u64(uint64_t seed, uint64_t counter) {
  uint32_t r[4];
  Philox::block(seed, counter, r);
  return (static_cast<uint64_t>(r[0]) << 32) | r[1];
}

// uniform_: lo + (hi - lo) * u (one fused rounding) with u = k * 2^-digits, where digits is the dtype's significand
// width (53, 24, 11 or 8 bits), so u is exact in the dtype and rounding on store can never turn
// a value just below 1 into 1.
struct UniformDraw {
  uint64_t seed;
  uint64_t base;
  double lo, hi;
  int digits;    // 1..53
  double scale;  // 2^-digits

  BRISK_HOST_DEVICE double operator()(int64_t i) const {
    const uint64_t bits = philox_u64(seed, base + static_cast<uint64_t>(i)) >> (64 - digits);
    const double u = static_cast<double>(bits) * scale;  // exact: a power-of-two scaling
    return fused_mul_add(hi - lo, u, lo);
  }
};

// normal_: Box-Muller on the block's two 53-bit halves, mean + (std * sqrt(-2 log u1)) cos(2 pi u2)
// (the last product and sum fused) with u1 in (0, 1] and u2 in [0, 1); the sine half of the pair is not used, so the
// value of element i depends on counter base + i alone.
struct NormalDraw {
  uint64_t seed;
  uint64_t base;
  double mean, stddev;

  BRISK_HOST_DEVICE double operator()(int64_t i) const {
    uint32_t r[4];
    Philox::block(seed, base + static_cast<uint64_t>(i), r);
    const double u1 = 1.0 - Philox::to_unit_double(r[0], r[1]);  // exact: both on the 2^-53 grid
    const double u2 = Philox::to_unit_double(r[2], r[3]);
    const double radius = math::sqrt(-2.0 * portable_log(u1));  // IEEE sqrt on both sides
    return fused_mul_add(unfused_mul(stddev, radius), cos_two_pi(u2), mean);
  }
};

// randint: low + (v mod range) for the block's 64 bits v (the modulo bias is below range / 2^64),
// returned as a double as the CPU has always stored it.
struct RandintDraw {
  uint64_t seed;
  uint64_t base;
  int64_t low;
  uint64_t range;  // high - low, >= 1

  BRISK_HOST_DEVICE double operator()(int64_t i) const {
    const uint64_t v = philox_u64(seed, base + static_cast<uint64_t>(i));
    return static_cast<double>(low + static_cast<int64_t>(v % range));
  }
};

}  // namespace brisk::kernels::device
