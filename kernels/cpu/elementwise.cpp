// CPU elementwise kernels: unary, binary, compare, where, clamp, copy/cast, fill.
#include <cmath>
#include <type_traits>

#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/pointwise.h"
#include "brisk/kernels/dispatch.h"
#include "cpu/cpu_kernels.h"
#include "cpu/fast_math.h"
#include "cpu/loops.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

namespace {

template <class A>
A sigmoid_of(A x) {
  return A(1) / (A(1) + fast_exp(-x));
}

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

// Applies a unary op in floating point.
template <class T>
void unary_float(UnaryOp op, const Tensor& x, const Tensor& out) {
  using A = acc_t<T>;
  switch (op) {
    case UnaryOp::Neg:
      return map1<T, T>(x, out, [](A v) { return -v; });
    case UnaryOp::Exp:
      return map1<T, T>(x, out, [](A v) { return fast_exp(v); });
    case UnaryOp::Log:
      return map1<T, T>(x, out, [](A v) { return std::log(v); });
    case UnaryOp::Sqrt:
      return map1<T, T>(x, out, [](A v) { return std::sqrt(v); });
    case UnaryOp::Rsqrt:
      return map1<T, T>(x, out, [](A v) { return A(1) / std::sqrt(v); });
    case UnaryOp::Abs:
      return map1<T, T>(x, out, [](A v) { return std::abs(v); });
    case UnaryOp::Relu:
      return map1<T, T>(x, out, [](A v) { return v > A(0) ? v : A(0); });
    case UnaryOp::GeluTanh:
      return map1<T, T>(
          x, out, [](A v) { return A(0.5) * v * (A(1) + fast_tanh(A(kSqrt2OverPi) * (v + A(0.044715) * v * v * v))); });
    case UnaryOp::GeluErf:
      return map1<T, T>(x, out, [](A v) { return A(0.5) * v * (A(1) + std::erf(v * A(kInvSqrt2))); });
    case UnaryOp::Silu:
      return map1<T, T>(x, out, [](A v) { return v * sigmoid_of(v); });
    case UnaryOp::Sigmoid:
      return map1<T, T>(x, out, [](A v) { return sigmoid_of(v); });
    case UnaryOp::Tanh:
      return map1<T, T>(x, out, [](A v) { return fast_tanh(v); });
    case UnaryOp::Sin:
      return map1<T, T>(x, out, [](A v) { return std::sin(v); });
    case UnaryOp::Cos:
      return map1<T, T>(x, out, [](A v) { return std::cos(v); });
    case UnaryOp::Square:
      return map1<T, T>(x, out, [](A v) { return v * v; });
    case UnaryOp::Reciprocal:
      return map1<T, T>(x, out, [](A v) { return A(1) / v; });
    case UnaryOp::Sign:
      return map1<T, T>(x, out, [](A v) { return A((v > A(0)) - (v < A(0))); });
    case UnaryOp::Log1p:
      return map1<T, T>(x, out, [](A v) { return std::log1p(v); });
    case UnaryOp::Expm1:
      return map1<T, T>(x, out, [](A v) { return std::expm1(v); });
  }
}

template <class T>
void unary_int(UnaryOp op, const Tensor& x, const Tensor& out) {
  switch (op) {
    case UnaryOp::Neg:
      return map1<T, T>(x, out, [](T v) { return static_cast<T>(-v); });
    case UnaryOp::Abs:
      return map1<T, T>(x, out, [](T v) {
        if constexpr (std::is_signed_v<T>) return static_cast<T>(v < 0 ? -v : v);
        return v;
      });
    case UnaryOp::Relu:
      return map1<T, T>(x, out, [](T v) { return v > 0 ? v : T(0); });
    case UnaryOp::Square:
      return map1<T, T>(x, out, [](T v) { return static_cast<T>(v * v); });
    case UnaryOp::Sign:
      return map1<T, T>(x, out, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
    default:
      BRISK_THROW(op_name(op), ": not implemented for integer dtype ", dtype_name(x.dtype()));
  }
}

template <class T>
void unary_backward_float(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y, const Tensor& out) {
  using A = acc_t<T>;
  auto run = [&](auto f) { map3<T, T, T, T>(g, x, y, out, f); };
  switch (op) {
    case UnaryOp::Neg:
      return run([](A gv, A, A) { return -gv; });
    case UnaryOp::Exp:
      return run([](A gv, A, A yv) { return gv * yv; });
    case UnaryOp::Log:
      return run([](A gv, A xv, A) { return gv / xv; });
    case UnaryOp::Sqrt:
      return run([](A gv, A, A yv) { return gv / (A(2) * yv); });
    case UnaryOp::Rsqrt:
      return run([](A gv, A, A yv) { return A(-0.5) * gv * yv * yv * yv; });
    case UnaryOp::Abs:
      return run([](A gv, A xv, A) { return gv * A((xv > A(0)) - (xv < A(0))); });
    case UnaryOp::Relu:
      return run([](A gv, A xv, A) { return xv > A(0) ? gv : A(0); });
    case UnaryOp::GeluTanh:
      return run([](A gv, A xv, A) {
        const A k = A(kSqrt2OverPi);
        A inner = k * (xv + A(0.044715) * xv * xv * xv);
        A th = fast_tanh(inner);
        A dinner = k * (A(1) + A(3 * 0.044715) * xv * xv);
        return gv * (A(0.5) * (A(1) + th) + A(0.5) * xv * (A(1) - th * th) * dinner);
      });
    case UnaryOp::GeluErf:
      return run([](A gv, A xv, A) {
        A cdf = A(0.5) * (A(1) + std::erf(xv * A(kInvSqrt2)));
        A pdf = A(kInvSqrt2Pi) * std::exp(A(-0.5) * xv * xv);
        return gv * (cdf + xv * pdf);
      });
    case UnaryOp::Silu:
      return run([](A gv, A xv, A) {
        A s = sigmoid_of(xv);
        return gv * s * (A(1) + xv * (A(1) - s));
      });
    case UnaryOp::Sigmoid:
      return run([](A gv, A, A yv) { return gv * yv * (A(1) - yv); });
    case UnaryOp::Tanh:
      return run([](A gv, A, A yv) { return gv * (A(1) - yv * yv); });
    case UnaryOp::Sin:
      return run([](A gv, A xv, A) { return gv * std::cos(xv); });
    case UnaryOp::Cos:
      return run([](A gv, A xv, A) { return -gv * std::sin(xv); });
    case UnaryOp::Square:
      return run([](A gv, A xv, A) { return A(2) * gv * xv; });
    case UnaryOp::Reciprocal:
      return run([](A gv, A, A yv) { return -gv * yv * yv; });
    case UnaryOp::Sign:
      return run([](A, A, A) { return A(0); });
    case UnaryOp::Log1p:
      return run([](A gv, A xv, A) { return gv / (A(1) + xv); });
    case UnaryOp::Expm1:
      return run([](A gv, A, A yv) { return gv * (yv + A(1)); });
  }
}

template <class A>
A apply_binary(BinaryOp op, A x, A y) {
  switch (op) {
    case BinaryOp::Add:
      return x + y;
    case BinaryOp::Sub:
      return x - y;
    case BinaryOp::Mul:
      return x * y;
    case BinaryOp::Div:
      return x / y;
    case BinaryOp::Pow:
      return static_cast<A>(std::pow(x, y));
    case BinaryOp::Maximum:
      return x > y || x != x ? x : y;  // NaN propagates
    case BinaryOp::Minimum:
      return x < y || x != x ? x : y;
  }
  return x;
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using A = acc_t<T>;
  // The common ops get their own instantiation so the inner loop vectorises.
  switch (op) {
    case BinaryOp::Add:
      return map2<T, T>(a, b, out, [](A x, A y) { return static_cast<A>(x + y); });
    case BinaryOp::Sub:
      return map2<T, T>(a, b, out, [](A x, A y) { return static_cast<A>(x - y); });
    case BinaryOp::Mul:
      return map2<T, T>(a, b, out, [](A x, A y) { return static_cast<A>(x * y); });
    case BinaryOp::Div:
      if constexpr (std::is_integral_v<T>) {
        BRISK_THROW("div: integer division is done in floating point; cast first");
      } else {
        return map2<T, T>(a, b, out, [](A x, A y) { return x / y; });
      }
    default:
      return map2<T, T>(a, b, out, [op](A x, A y) { return apply_binary(op, x, y); });
  }
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  if (x.is_floating_point()) {
    visit_float(x.dtype(), x.device(), op_name(op), [&](auto t) { unary_float<decltype(t)>(op, x, out); });
  } else {
    visit_numeric(x.dtype(), x.device(), op_name(op), [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_floating_point_v<T> && !std::is_same_v<T, Half> && !std::is_same_v<T, BFloat16>)
        unary_int<T>(op, x, out);
    });
  }
}

void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, const Tensor& out) {
  visit_float(out.dtype(), out.device(), op_name(op),
              [&](auto t) { unary_backward_float<decltype(t)>(op, grad, x, y, out); });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_numeric(out.dtype(), out.device(), op_name(op), [&](auto t) { binary_typed<decltype(t)>(op, a, b, out); });
}

void binary_scalar(BinaryOp op, const Tensor& a, double s, bool scalar_first, const Tensor& out) {
  visit_numeric(out.dtype(), out.device(), op_name(op), [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    const A sv = static_cast<A>(s);
    if (scalar_first) {
      map1<T, T>(a, out, [op, sv](A x) { return apply_binary(op, sv, x); });
      return;
    }
    switch (op) {
      case BinaryOp::Add:
        return map1<T, T>(a, out, [sv](A x) { return static_cast<A>(x + sv); });
      case BinaryOp::Mul:
        return map1<T, T>(a, out, [sv](A x) { return static_cast<A>(x * sv); });
      default:
        return map1<T, T>(a, out, [op, sv](A x) { return apply_binary(op, x, sv); });
    }
  });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_all(a.dtype(), a.device(), op_name(op), [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    map2<bool, T>(a, b, out, [op](A x, A y) { return device::compare_value(op, x, y); });
  });
}

void compare_scalar(CompareOp op, const Tensor& a, double s, const Tensor& out) {
  visit_all(a.dtype(), a.device(), op_name(op), [&](auto t) {
    using T = decltype(t);
    map1<bool, T>(a, out, [op, s](acc_t<T> x) { return device::compare_value<double>(op, static_cast<double>(x), s); });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_all(out.dtype(), out.device(), "where", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    auto f = [](auto c, A x, A y) { return c ? x : y; };
    if (cond.dtype() == DType::Bool)
      map3<T, bool, T, T>(cond, a, b, out, f);
    else
      map3<T, uint8_t, T, T>(cond, a, b, out, f);
  });
}

void clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi, const Tensor& out) {
  visit_numeric(x.dtype(), x.device(), "clamp", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    const A l = has_lo ? static_cast<A>(*lo) : A(0), h = has_hi ? static_cast<A>(*hi) : A(0);
    map1<T, T>(x, out, [=](A v) {
      if (v != v) return v;
      if (has_lo && v < l) v = l;
      if (has_hi && v > h) v = h;
      return v;
    });
  });
}

void clamp_backward(const Tensor& grad, const Tensor& x, std::optional<double> lo, std::optional<double> hi,
                    const Tensor& out) {
  visit_float(x.dtype(), x.device(), "clamp_backward", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    const A l = has_lo ? static_cast<A>(*lo) : A(0), h = has_hi ? static_cast<A>(*hi) : A(0);
    map2<T, T>(grad, x, out, [=](A g, A v) { return ((has_lo && v < l) || (has_hi && v > h)) ? A(0) : g; });
  });
}

namespace {

// Copies a view whose last two dims are transposed relative to the destination (src strides
// (1, R) where dst has (C, 1)) in 32x32 tiles, so both sides are read and written a cache line
// at a time; the row-by-row strided loop would touch a new line for every element read.
// Returns false when the layout is not that case. Same dtype only.
template <class T>
bool copy_transposed_tiles(const Tensor& dst, const Tensor& src) {
  auto s = coalesce<2>(dst.sizes(), {dst.strides(), broadcast_strides(src.sizes(), src.strides(), dst.sizes())});
  const int64_t nd = static_cast<int64_t>(s.sizes.size());
  if (nd < 2) return false;
  const int64_t R = s.sizes[nd - 2], C = s.sizes[nd - 1];
  const auto& ds = s.strides[0];
  const auto& ss = s.strides[1];
  if (ds[nd - 1] != 1 || ds[nd - 2] != C || ss[nd - 2] != 1 || ss[nd - 1] == 1 || R < 16 || C < 16) return false;
  const int64_t col_stride = ss[nd - 1];
  int64_t outer = 1;
  for (int64_t d = 0; d + 2 < nd; ++d) outer *= s.sizes[d];
  constexpr int64_t B = 32;
  const int64_t rb = (R + B - 1) / B, cb = (C + B - 1) / B;
  T* dbase = static_cast<T*>(dst.data_ptr());
  const T* sbase = static_cast<const T*>(src.data_ptr());
#pragma omp parallel for schedule(static) if (outer * R * C > 65536)
  for (int64_t task = 0; task < outer * rb * cb; ++task) {
    int64_t o = task / (rb * cb), blk = task % (rb * cb);
    int64_t i0 = (blk / cb) * B, j0 = (blk % cb) * B;
    int64_t doff = 0, soff = 0, rem = o;
    for (int64_t d = nd - 3; d >= 0; --d) {
      int64_t idx = rem % s.sizes[d];
      rem /= s.sizes[d];
      doff += idx * ds[d];
      soff += idx * ss[d];
    }
    const int64_t i1 = std::min(R, i0 + B), j1 = std::min(C, j0 + B);
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = j0; j < j1; ++j) dbase[doff + i * C + j] = sbase[soff + i + j * col_stride];
  }
  return true;
}

// Element copies by size: the bytes are moved unchanged.
bool copy_transposed_same_dtype(const Tensor& dst, const Tensor& src) {
  switch (dst.element_size()) {
    case 1:
      return copy_transposed_tiles<uint8_t>(dst, src);
    case 2:
      return copy_transposed_tiles<uint16_t>(dst, src);
    case 4:
      return copy_transposed_tiles<uint32_t>(dst, src);
    case 8:
      return copy_transposed_tiles<uint64_t>(dst, src);
    default:
      return false;
  }
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && copy_transposed_same_dtype(dst, src)) return;
  visit_all(dst.dtype(), dst.device(), "copy", [&](auto to) {
    using To = decltype(to);
    visit_all(src.dtype(), src.device(), "copy", [&](auto from) {
      using From = decltype(from);
      map1<To, From>(src, dst, [](acc_t<From> v) {
        if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>)
          return static_cast<float>(v);
        else
          return device::from_acc<To>(v);  // defined for out-of-range floats too
      });
    });
  });
}

void fill(const Tensor& t, double v) {
  visit_all(t.dtype(), t.device(), "fill", [&](auto tag) {
    using T = decltype(tag);
    const T val = static_cast<T>(static_cast<acc_t<T>>(v));
    auto s = coalesce<1>(t.sizes(), {t.strides()});
    T* p = static_cast<T*>(t.data_ptr());
    for_each_row<1>(s, [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
      for (int64_t i = 0; i < n; ++i) p[off[0] + i * st[0]] = val;
    });
  });
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  visit_numeric(dst.dtype(), dst.device(), "add_", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    if (alpha == 1.0) {
      map2<T, T>(dst, src, dst, [](A x, A y) { return static_cast<A>(x + y); });
    } else {
      const A al = static_cast<A>(alpha);
      map2<T, T>(dst, src, dst, [al](A x, A y) { return static_cast<A>(x + al * y); });
    }
  });
}

void mul_scalar_(const Tensor& dst, double s) {
  visit_numeric(dst.dtype(), dst.device(), "mul_", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    const A sv = static_cast<A>(s);
    map1<T, T>(dst, dst, [sv](A x) { return static_cast<A>(x * sv); });
  });
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
