// Comparisons, where, clamp and the in-place accumulations on the GPU, through the elementwise
// loop of cuda/loops.cuh with the functors of device/pointwise.h. Comparisons take the op at run
// time (one kernel per dtype: they are memory-bound, and a uniform switch costs nothing there).
#include "brisk/kernels/device/pointwise.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/elementwise.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

using brisk::cuda::detail::launch_elementwise;

// out: bool, any strides; a, b: one dtype, broadcast to out's shape.
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  OpScope scope(op_name(op), &a, &b);
  visit_all(a.dtype(), a.device(), op_name(op), [&](auto t) {
    using T = decltype(t);
    launch_elementwise<bool, T, T>("compare", out, {&a, &b}, device::CompareFn<acc_t<T>>{op});
  });
}

// out: bool; a: out's shape, any dtype and strides. Compared in double, as on the CPU.
void compare_scalar(CompareOp op, const Tensor& a, double s, const Tensor& out) {
  OpScope scope(op_name(op), &a);
  visit_all(a.dtype(), a.device(), op_name(op), [&](auto t) {
    using T = decltype(t);
    launch_elementwise<bool, T>("compare_scalar", out, {&a}, device::CompareScalarFn<acc_t<T>>{op, s});
  });
}

// cond: bool or u8; a, b: out's dtype; all three broadcast to out's shape, any strides.
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  OpScope scope("where", &cond, &a, &b);
  visit_all(out.dtype(), out.device(), "where", [&](auto t) {
    using T = decltype(t);
    if (cond.dtype() == DType::Bool)
      launch_elementwise<T, bool, T, T>("where", out, {&cond, &a, &b}, device::WhereFn<acc_t<T>>{});
    else
      launch_elementwise<T, uint8_t, T, T>("where_u8", out, {&cond, &a, &b}, device::WhereFn<acc_t<T>>{});
  });
}

// x, out: same shape and numeric dtype, any strides.
void clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi, const Tensor& out) {
  OpScope scope("clamp", &x);
  visit_numeric(x.dtype(), x.device(), "clamp", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    const device::ClampFn<A> f{lo.has_value(), hi.has_value(), lo ? static_cast<A>(*lo) : A(0),
                               hi ? static_cast<A>(*hi) : A(0)};
    launch_elementwise<T, T>("clamp", out, {&x}, f);
  });
}

// grad, x, out: same shape and float dtype, any strides; out written with =.
void clamp_backward(const Tensor& grad, const Tensor& x, std::optional<double> lo, std::optional<double> hi,
                    const Tensor& out) {
  OpScope scope("clamp_backward", &grad, &x);
  visit_float(x.dtype(), x.device(), "clamp_backward", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    const device::ClampBackwardFn<A> f{lo.has_value(), hi.has_value(), lo ? static_cast<A>(*lo) : A(0),
                                       hi ? static_cast<A>(*hi) : A(0)};
    launch_elementwise<T, T, T>("clamp_backward", out, {&grad, &x}, f);
  });
}

// dst: any strides (written in place, each element by the thread that reads it); src: dst's
// dtype, broadcast to dst's shape. dst += alpha * src.
void add_(const Tensor& dst, const Tensor& src, double alpha) {
  OpScope scope("add_", &dst, &src);
  visit_numeric(dst.dtype(), dst.device(), "add_", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    launch_elementwise<T, T, T>("add_", dst, {&dst, &src}, device::AddScaledFn<A>{static_cast<A>(alpha)});
  });
}

// dst: any strides, scaled in place.
void mul_scalar_(const Tensor& dst, double s) {
  OpScope scope("mul_", &dst);
  visit_numeric(dst.dtype(), dst.device(), "mul_", [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    launch_elementwise<T, T>("mul_", dst, {&dst}, device::MulScalarFn<A>{static_cast<A>(s)});
  });
}

}  // namespace brisk::kernels::cuda
