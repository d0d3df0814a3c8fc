// Per-element math of the elementwise kernels, written once for host and device: the CUDA
// kernels (kernels/cuda/unary.cu, binary.cu, elementwise.cu) apply these functors, and the host
// tests apply the same functors to the CPU kernels' inputs and compare with their results. Every
// formula is the CPU kernel's (kernels/cpu/elementwise.cpp) term for term, in the same order, so
// NaN handling (maximum, minimum, clamp, relu, sign), integer wrap-around and the dtypes each op
// takes are the same. Values arrive in their compute type (acc_t: float for f16/bf16).
//
// Where the results may differ from the CPU's in the last bits:
//  - exp, sigmoid and silu: the CPU uses a vectorisable polynomial exp (within 2 ulp; exactly 0
//    below -87.33 and +inf above 88); these functors use libm's exp on the host and CUDA's
//    accurate expf/exp on the device (within 2 ulp; subnormal results kept).
//  - the other transcendental functions: CUDA's versions are within 1-4 ulp of libm's.
//  - a * b + c: nvcc fuses it into one FMA (one rounding instead of two), and so does GCC for
//    a target with FMA (brisk builds with -march=native); where only one side fuses, the last
//    bit may differ.
//  - integer pow: exact repeated squaring; the CPU computes it in double and truncates, so the
//    two agree wherever the result fits in 53 bits (beyond that the CPU's value is rounded, and
//    an overflowing conversion is undefined behaviour in C++).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "brisk/core/macros.h"
#include "brisk/kernels/elementwise.h"

namespace brisk::kernels::device {

inline constexpr double kSqrt2OverPi = 0.7978845608028654;
inline constexpr double kInvSqrt2 = 0.7071067811865476;
inline constexpr double kInvSqrt2Pi = 0.3989422804014327;

// --- libm, on both sides --------------------------------------------------------------------------
// float and double overloads: libm on the host (what the CPU kernels call through std::), CUDA's
// accurate versions on the device (never the __expf-style intrinsics).
namespace math {
BRISK_HOST_DEVICE inline float exp(float v) {
  return ::expf(v);
}
BRISK_HOST_DEVICE inline double exp(double v) {
  return ::exp(v);
}
BRISK_HOST_DEVICE inline float log(float v) {
  return ::logf(v);
}
BRISK_HOST_DEVICE inline double log(double v) {
  return ::log(v);
}
BRISK_HOST_DEVICE inline float sqrt(float v) {
  return ::sqrtf(v);
}
BRISK_HOST_DEVICE inline double sqrt(double v) {
  return ::sqrt(v);
}
BRISK_HOST_DEVICE inline float abs(float v) {
  return ::fabsf(v);
}
BRISK_HOST_DEVICE inline double abs(double v) {
  return ::fabs(v);
}
BRISK_HOST_DEVICE inline float tanh(float v) {
  return ::tanhf(v);
}
BRISK_HOST_DEVICE inline double tanh(double v) {
  return ::tanh(v);
}
BRISK_HOST_DEVICE inline float erf(float v) {
  return ::erff(v);
}
BRISK_HOST_DEVICE inline double erf(double v) {
  return ::erf(v);
}
BRISK_HOST_DEVICE inline float sin(float v) {
  return ::sinf(v);
}
BRISK_HOST_DEVICE inline double sin(double v) {
  return ::sin(v);
}
BRISK_HOST_DEVICE inline float cos(float v) {
  return ::cosf(v);
}
BRISK_HOST_DEVICE inline double cos(double v) {
  return ::cos(v);
}
BRISK_HOST_DEVICE inline float log1p(float v) {
  return ::log1pf(v);
}
BRISK_HOST_DEVICE inline double log1p(double v) {
  return ::log1p(v);
}
BRISK_HOST_DEVICE inline float expm1(float v) {
  return ::expm1f(v);
}
BRISK_HOST_DEVICE inline double expm1(double v) {
  return ::expm1(v);
}
BRISK_HOST_DEVICE inline float pow(float x, float y) {
  return ::powf(x, y);
}
BRISK_HOST_DEVICE inline double pow(double x, double y) {
  return ::pow(x, y);
}
}  // namespace math

template <class A>
BRISK_HOST_DEVICE inline bool is_nan(A v) {
  if constexpr (std::numeric_limits<A>::has_quiet_NaN) {
    return v != v;
  } else {
    return false;
  }
}

// --- unary ------------------------------------------------------------------------------------

template <class A>
BRISK_HOST_DEVICE inline A sigmoid_value(A x) {
  return A(1) / (A(1) + math::exp(-x));
}

// y = op(v) for a floating compute type (float or double).
template <UnaryOp Op, class A>
BRISK_HOST_DEVICE inline A unary_value(A v) {
  static_assert(std::is_floating_point_v<A>, "unary_value: float compute types only (see unary_int_value)");
  if constexpr (Op == UnaryOp::Neg)
    return -v;
  else if constexpr (Op == UnaryOp::Exp)
    return math::exp(v);
  else if constexpr (Op == UnaryOp::Log)
    return math::log(v);
  else if constexpr (Op == UnaryOp::Sqrt)
    return math::sqrt(v);
  else if constexpr (Op == UnaryOp::Rsqrt)
    return A(1) / math::sqrt(v);  // IEEE division and sqrt, not rsqrt
  else if constexpr (Op == UnaryOp::Abs)
    return math::abs(v);
  else if constexpr (Op == UnaryOp::Relu)
    return v > A(0) ? v : A(0);  // NaN -> 0, as the CPU
  else if constexpr (Op == UnaryOp::GeluTanh)
    return A(0.5) * v * (A(1) + math::tanh(A(kSqrt2OverPi) * (v + A(0.044715) * v * v * v)));
  else if constexpr (Op == UnaryOp::GeluErf)
    return A(0.5) * v * (A(1) + math::erf(v * A(kInvSqrt2)));
  else if constexpr (Op == UnaryOp::Silu)
    return v * sigmoid_value(v);
  else if constexpr (Op == UnaryOp::Sigmoid)
    return sigmoid_value(v);
  else if constexpr (Op == UnaryOp::Tanh)
    return math::tanh(v);
  else if constexpr (Op == UnaryOp::Sin)
    return math::sin(v);
  else if constexpr (Op == UnaryOp::Cos)
    return math::cos(v);
  else if constexpr (Op == UnaryOp::Square)
    return v * v;
  else if constexpr (Op == UnaryOp::Reciprocal)
    return A(1) / v;
  else if constexpr (Op == UnaryOp::Sign)
    return A((v > A(0)) - (v < A(0)));  // NaN -> 0, as the CPU
  else if constexpr (Op == UnaryOp::Log1p)
    return math::log1p(v);
  else
    return math::expm1(v);
}

// The ops that take integers (the others are computed in f32 by kernels::unary).
BRISK_HOST_DEVICE constexpr bool unary_takes_integers(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu || op == UnaryOp::Square ||
         op == UnaryOp::Sign;
}

// y = op(v) for an integer type, wrapping around on overflow as the CPU does (computed in the
// unsigned type so that -INT_MIN and overflowing squares are defined behaviour).
template <UnaryOp Op, class T>
BRISK_HOST_DEVICE inline T unary_int_value(T v) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "unary_int_value: integer types only");
  static_assert(unary_takes_integers(Op), "unary_int_value: op does not take integers");
  using U = std::make_unsigned_t<T>;
  const U u = static_cast<U>(v);
  if constexpr (Op == UnaryOp::Neg)
    return static_cast<T>(static_cast<U>(U(0) - u));
  else if constexpr (Op == UnaryOp::Abs) {
    if constexpr (std::is_signed_v<T>)
      return v < 0 ? static_cast<T>(static_cast<U>(U(0) - u)) : v;
    else
      return v;
  } else if constexpr (Op == UnaryOp::Relu)
    return v > 0 ? v : T(0);
  else if constexpr (Op == UnaryOp::Square)
    return static_cast<T>(static_cast<U>(u * u));
  else if constexpr (std::is_signed_v<T>)
    return static_cast<T>((v > 0) - (v < 0));
  else
    return static_cast<T>(v > 0);
}

template <UnaryOp Op, class A>
struct UnaryFn {
  BRISK_HOST_DEVICE A operator()(A v) const {
    if constexpr (std::is_floating_point_v<A>)
      return unary_value<Op>(v);
    else
      return unary_int_value<Op>(v);
  }
};

// dx = g * op'(x), given x and y = op(x) (each formula uses whichever the CPU's does).
template <UnaryOp Op, class A>
BRISK_HOST_DEVICE inline A unary_backward_value(A gv, A xv, A yv) {
  static_assert(std::is_floating_point_v<A>, "unary_backward_value: float compute types only");
  if constexpr (Op == UnaryOp::Neg)
    return -gv;
  else if constexpr (Op == UnaryOp::Exp)
    return gv * yv;
  else if constexpr (Op == UnaryOp::Log)
    return gv / xv;
  else if constexpr (Op == UnaryOp::Sqrt)
    return gv / (A(2) * yv);
  else if constexpr (Op == UnaryOp::Rsqrt)
    return A(-0.5) * gv * yv * yv * yv;
  else if constexpr (Op == UnaryOp::Abs)
    return gv * A((xv > A(0)) - (xv < A(0)));
  else if constexpr (Op == UnaryOp::Relu)
    return xv > A(0) ? gv : A(0);
  else if constexpr (Op == UnaryOp::GeluTanh) {
    const A k = A(kSqrt2OverPi);
    const A inner = k * (xv + A(0.044715) * xv * xv * xv);
    const A th = math::tanh(inner);
    const A dinner = k * (A(1) + A(3 * 0.044715) * xv * xv);
    return gv * (A(0.5) * (A(1) + th) + A(0.5) * xv * (A(1) - th * th) * dinner);
  } else if constexpr (Op == UnaryOp::GeluErf) {
    const A cdf = A(0.5) * (A(1) + math::erf(xv * A(kInvSqrt2)));
    const A pdf = A(kInvSqrt2Pi) * math::exp(A(-0.5) * xv * xv);
    return gv * (cdf + xv * pdf);
  } else if constexpr (Op == UnaryOp::Silu) {
    const A s = sigmoid_value(xv);
    return gv * s * (A(1) + xv * (A(1) - s));
  } else if constexpr (Op == UnaryOp::Sigmoid)
    return gv * yv * (A(1) - yv);
  else if constexpr (Op == UnaryOp::Tanh)
    return gv * (A(1) - yv * yv);
  else if constexpr (Op == UnaryOp::Sin)
    return gv * math::cos(xv);
  else if constexpr (Op == UnaryOp::Cos)
    return -gv * math::sin(xv);
  else if constexpr (Op == UnaryOp::Square)
    return A(2) * gv * xv;
  else if constexpr (Op == UnaryOp::Reciprocal)
    return -gv * yv * yv;
  else if constexpr (Op == UnaryOp::Sign)
    return A(0);
  else if constexpr (Op == UnaryOp::Log1p)
    return gv / (A(1) + xv);
  else
    return gv * (yv + A(1));
}

template <UnaryOp Op, class A>
struct UnaryBackwardFn {
  BRISK_HOST_DEVICE A operator()(A g, A x, A y) const { return unary_backward_value<Op>(g, x, y); }
};

// --- binary -----------------------------------------------------------------------------------

// x^y for integers: exact repeated squaring in the unsigned type (wrapping on overflow). A
// negative exponent gives what the CPU's double pow truncates to: 1 for x = 1, +-1 for x = -1, 0
// for |x| > 1, and for x = 0 (pow is +inf) the type's minimum, which is what x86 converts +inf to.
template <class T>
BRISK_HOST_DEVICE inline T int_pow(T x, T y) {
  if constexpr (std::is_signed_v<T>) {
    if (y < 0) {
      if (x == 1) return T(1);
      if (x == -1) return (y & 1) ? T(-1) : T(1);
      if (x == 0) return std::numeric_limits<T>::min();
      return T(0);
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, base = static_cast<U>(x), e = static_cast<U>(y);
  while (e != 0) {
    if (e & 1) result = static_cast<U>(result * base);
    base = static_cast<U>(base * base);
    e = static_cast<U>(e >> 1);
  }
  return static_cast<T>(result);
}

// x op y in the compute type A. Division of integers never reaches the kernels (kernels::binary
// divides them in f32); it is defined here (0 for a zero divisor) only so every op compiles for
// every type.
template <BinaryOp Op, class A>
BRISK_HOST_DEVICE inline A binary_value(A x, A y) {
  if constexpr (Op == BinaryOp::Add)
    return static_cast<A>(x + y);
  else if constexpr (Op == BinaryOp::Sub)
    return static_cast<A>(x - y);
  else if constexpr (Op == BinaryOp::Mul)
    return static_cast<A>(x * y);
  else if constexpr (Op == BinaryOp::Div) {
    if constexpr (std::is_integral_v<A>)
      return y == A(0) ? A(0) : static_cast<A>(x / y);
    else
      return x / y;
  } else if constexpr (Op == BinaryOp::Pow) {
    if constexpr (std::is_integral_v<A>)
      return int_pow(x, y);
    else
      return math::pow(x, y);
  } else if constexpr (Op == BinaryOp::Maximum)
    return x > y || is_nan(x) ? x : y;  // NaN propagates
  else
    return x < y || is_nan(x) ? x : y;
}

// The same with the op chosen at run time (one kernel for all ops, for the rarer paths).
template <class A>
BRISK_HOST_DEVICE inline A binary_value(BinaryOp op, A x, A y) {
  switch (op) {
    case BinaryOp::Add:
      return binary_value<BinaryOp::Add>(x, y);
    case BinaryOp::Sub:
      return binary_value<BinaryOp::Sub>(x, y);
    case BinaryOp::Mul:
      return binary_value<BinaryOp::Mul>(x, y);
    case BinaryOp::Div:
      return binary_value<BinaryOp::Div>(x, y);
    case BinaryOp::Pow:
      return binary_value<BinaryOp::Pow>(x, y);
    case BinaryOp::Maximum:
      return binary_value<BinaryOp::Maximum>(x, y);
    case BinaryOp::Minimum:
      return binary_value<BinaryOp::Minimum>(x, y);
  }
  return x;
}

template <BinaryOp Op, class A>
struct BinaryFn {
  BRISK_HOST_DEVICE A operator()(A x, A y) const { return binary_value<Op>(x, y); }
};

// x op s, with the scalar already converted to the compute type (on the host, as the CPU does).
template <BinaryOp Op, class A>
struct BinaryScalarFn {
  A s;
  BRISK_HOST_DEVICE A operator()(A x) const { return binary_value<Op>(x, s); }
};

// s op x (rsub, rdiv, rpow, ...).
template <class A>
struct ScalarBinaryFn {
  BinaryOp op;
  A s;
  BRISK_HOST_DEVICE A operator()(A x) const { return binary_value(op, s, x); }
};

// --- comparisons, where, clamp ------------------------------------------------------------------

template <class A>
BRISK_HOST_DEVICE inline bool compare_value(CompareOp op, A x, A y) {
  switch (op) {
    case CompareOp::Eq:
      return x == y;
    case CompareOp::Ne:
      return x != y;
    case CompareOp::Lt:
      return x < y;
    case CompareOp::Le:
      return x <= y;
    case CompareOp::Gt:
      return x > y;
    case CompareOp::Ge:
      return x >= y;
  }
  return false;
}

template <class A>
struct CompareFn {
  CompareOp op;
  BRISK_HOST_DEVICE bool operator()(A x, A y) const { return compare_value(op, x, y); }
};

// Against a scalar the CPU compares in double (so an i64 tensor meets a fractional bound exactly).
template <class A>
struct CompareScalarFn {
  CompareOp op;
  double s;
  BRISK_HOST_DEVICE bool operator()(A x) const { return compare_value<double>(op, static_cast<double>(x), s); }
};

// cond ? x : y; cond is bool or u8 (nonzero is true).
template <class A>
struct WhereFn {
  template <class C>
  BRISK_HOST_DEVICE A operator()(C c, A x, A y) const {
    return c ? x : y;
  }
};

// min(max(v, lo), hi) with either bound optional; NaN stays NaN. The bounds are converted to the
// compute type on the host, as the CPU does.
template <class A>
struct ClampFn {
  bool has_lo, has_hi;
  A lo, hi;
  BRISK_HOST_DEVICE A operator()(A v) const {
    if (is_nan(v)) return v;
    if (has_lo && v < lo) v = lo;
    if (has_hi && v > hi) v = hi;
    return v;
  }
};

// g where lo <= x <= hi (and where x is NaN), 0 elsewhere.
template <class A>
struct ClampBackwardFn {
  bool has_lo, has_hi;
  A lo, hi;
  BRISK_HOST_DEVICE A operator()(A g, A v) const { return ((has_lo && v < lo) || (has_hi && v > hi)) ? A(0) : g; }
};

// --- in place -----------------------------------------------------------------------------------

// dst + alpha * src, written as the CPU writes it (fused into one FMA by nvcc, and by GCC on FMA
// targets). With alpha = 1 (the CPU then computes dst + src) or any power of two the product is
// exact, so fused or not the result is the same.
template <class A>
struct AddScaledFn {
  A alpha;
  BRISK_HOST_DEVICE A operator()(A dst, A src) const { return static_cast<A>(dst + alpha * src); }
};

template <class A>
struct MulScalarFn {
  A s;
  BRISK_HOST_DEVICE A operator()(A x) const { return static_cast<A>(x * s); }
};

}  // namespace brisk::kernels::device
