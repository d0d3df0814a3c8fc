// Gradients of the unary ops on the GPU: one elementwise kernel per (op, dtype) over grad, x and
// y = op(x), applying the backward formulas of device/pointwise.h (the CPU's, term for term)
// through the loop of cuda/loops.cuh. f16/bf16 compute in f32.
#include <type_traits>

#include "brisk/kernels/device/pointwise.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/elementwise.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

namespace {

using brisk::cuda::detail::launch_elementwise;

// Kernel names for launch records and errors, indexed by UnaryOp.
constexpr const char* kBackwardNames[] = {
    "neg_backward",        "exp_backward",  "log_backward",       "sqrt_backward",     "rsqrt_backward",
    "abs_backward",        "relu_backward", "gelu_tanh_backward", "gelu_erf_backward", "silu_backward",
    "sigmoid_backward",    "tanh_backward", "sin_backward",       "cos_backward",      "square_backward",
    "reciprocal_backward", "sign_backward", "log1p_backward",     "expm1_backward"};
static_assert(std::size(kBackwardNames) == static_cast<size_t>(UnaryOp::Expm1) + 1);

// grad, x, y, out: same shape and dtype T, any strides.
template <class T, UnaryOp Op>
void run_backward(const Tensor& grad, const Tensor& x, const Tensor& y, const Tensor& out) {
  launch_elementwise<T, T, T, T>(kBackwardNames[static_cast<int>(Op)], out, {&grad, &x, &y},
                                 device::UnaryBackwardFn<Op, acc_t<T>>{});
}

template <class T>
void backward_float(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y, const Tensor& out) {
  switch (op) {
    case UnaryOp::Neg:
      return run_backward<T, UnaryOp::Neg>(g, x, y, out);
    case UnaryOp::Exp:
      return run_backward<T, UnaryOp::Exp>(g, x, y, out);
    case UnaryOp::Log:
      return run_backward<T, UnaryOp::Log>(g, x, y, out);
    case UnaryOp::Sqrt:
      return run_backward<T, UnaryOp::Sqrt>(g, x, y, out);
    case UnaryOp::Rsqrt:
      return run_backward<T, UnaryOp::Rsqrt>(g, x, y, out);
    case UnaryOp::Abs:
      return run_backward<T, UnaryOp::Abs>(g, x, y, out);
    case UnaryOp::Relu:
      return run_backward<T, UnaryOp::Relu>(g, x, y, out);
    case UnaryOp::GeluTanh:
      return run_backward<T, UnaryOp::GeluTanh>(g, x, y, out);
    case UnaryOp::GeluErf:
      return run_backward<T, UnaryOp::GeluErf>(g, x, y, out);
    case UnaryOp::Silu:
      return run_backward<T, UnaryOp::Silu>(g, x, y, out);
    case UnaryOp::Sigmoid:
      return run_backward<T, UnaryOp::Sigmoid>(g, x, y, out);
    case UnaryOp::Tanh:
      return run_backward<T, UnaryOp::Tanh>(g, x, y, out);
    case UnaryOp::Sin:
      return run_backward<T, UnaryOp::Sin>(g, x, y, out);
    case UnaryOp::Cos:
      return run_backward<T, UnaryOp::Cos>(g, x, y, out);
    case UnaryOp::Square:
      return run_backward<T, UnaryOp::Square>(g, x, y, out);
    case UnaryOp::Reciprocal:
      return run_backward<T, UnaryOp::Reciprocal>(g, x, y, out);
    case UnaryOp::Sign:
      return run_backward<T, UnaryOp::Sign>(g, x, y, out);
    case UnaryOp::Log1p:
      return run_backward<T, UnaryOp::Log1p>(g, x, y, out);
    case UnaryOp::Expm1:
      return run_backward<T, UnaryOp::Expm1>(g, x, y, out);
  }
}

}  // namespace

void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, const Tensor& out) {
  OpScope scope(op_name(op), &grad, &x);
  visit_float(out.dtype(), out.device(), op_name(op),
              [&](auto t) { backward_float<decltype(t)>(op, grad, x, y, out); });
}

}  // namespace brisk::kernels::cuda
