// Binary ops on the GPU: tensor-tensor with broadcasting (one kernel per op and dtype) and
// tensor-scalar (one kernel per op and dtype for `a op s`; one per dtype, op chosen at run time,
// for the rarer `s op a`). Functors from device/pointwise.h; mixed dtypes arrive already promoted
// by kernels::binary, so every operand here has out's dtype.
#include <type_traits>

#include "brisk/kernels/device/pointwise.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/elementwise.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

namespace {

using brisk::cuda::detail::launch_elementwise;

constexpr const char* kBinaryNames[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
constexpr const char* kScalarNames[] = {"add_scalar", "sub_scalar",     "mul_scalar",    "div_scalar",
                                        "pow_scalar", "maximum_scalar", "minimum_scalar"};
static_assert(std::size(kBinaryNames) == static_cast<size_t>(BinaryOp::Minimum) + 1);
static_assert(std::size(kScalarNames) == std::size(kBinaryNames));

// a, b: broadcast to out's shape, any strides; all of dtype T.
template <class T, BinaryOp Op>
void run_binary(const Tensor& a, const Tensor& b, const Tensor& out) {
  launch_elementwise<T, T, T>(kBinaryNames[static_cast<int>(Op)], out, {&a, &b}, device::BinaryFn<Op, acc_t<T>>{});
}

// a: out's shape, any strides; s already converted to the compute type.
template <class T, BinaryOp Op>
void run_scalar(const Tensor& a, acc_t<T> s, const Tensor& out) {
  launch_elementwise<T, T>(kScalarNames[static_cast<int>(Op)], out, {&a}, device::BinaryScalarFn<Op, acc_t<T>>{s});
}

template <class T>
constexpr bool is_integer_type() {
  return std::is_integral_v<T>;
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  OpScope scope(op_name(op), &a, &b);
  visit_numeric(out.dtype(), out.device(), op_name(op), [&](auto t) {
    using T = decltype(t);
    switch (op) {
      case BinaryOp::Add:
        return run_binary<T, BinaryOp::Add>(a, b, out);
      case BinaryOp::Sub:
        return run_binary<T, BinaryOp::Sub>(a, b, out);
      case BinaryOp::Mul:
        return run_binary<T, BinaryOp::Mul>(a, b, out);
      case BinaryOp::Div:
        if constexpr (is_integer_type<T>()) {
          BRISK_THROW("div: integer division is done in floating point; cast first");
        } else {
          return run_binary<T, BinaryOp::Div>(a, b, out);
        }
      case BinaryOp::Pow:
        return run_binary<T, BinaryOp::Pow>(a, b, out);
      case BinaryOp::Maximum:
        return run_binary<T, BinaryOp::Maximum>(a, b, out);
      case BinaryOp::Minimum:
        return run_binary<T, BinaryOp::Minimum>(a, b, out);
    }
  });
}

void binary_scalar(BinaryOp op, const Tensor& a, double s, bool scalar_first, const Tensor& out) {
  OpScope scope(op_name(op), &a);
  visit_numeric(out.dtype(), out.device(), op_name(op), [&](auto t) {
    using T = decltype(t);
    using A = acc_t<T>;
    // Converted on the host, as the CPU converts it (an integer tensor's scalar is integral:
    // kernels::binary_scalar computes in f32 otherwise).
    const A sv = static_cast<A>(s);
    if (scalar_first) {
      launch_elementwise<T, T>("scalar_binary", out, {&a}, device::ScalarBinaryFn<A>{op, sv});
      return;
    }
    switch (op) {
      case BinaryOp::Add:
        return run_scalar<T, BinaryOp::Add>(a, sv, out);
      case BinaryOp::Sub:
        return run_scalar<T, BinaryOp::Sub>(a, sv, out);
      case BinaryOp::Mul:
        return run_scalar<T, BinaryOp::Mul>(a, sv, out);
      case BinaryOp::Div:
        return run_scalar<T, BinaryOp::Div>(a, sv, out);
      case BinaryOp::Pow:
        return run_scalar<T, BinaryOp::Pow>(a, sv, out);
      case BinaryOp::Maximum:
        return run_scalar<T, BinaryOp::Maximum>(a, sv, out);
      case BinaryOp::Minimum:
        return run_scalar<T, BinaryOp::Minimum>(a, sv, out);
    }
  });
}

}  // namespace brisk::kernels::cuda
