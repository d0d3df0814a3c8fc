// Unary ops on the GPU: one elementwise kernel per (op, dtype), applying the functors of
// device/pointwise.h through the loop of cuda/loops.cuh (128-bit vectors when every operand is
// contiguous and aligned, the strided indexer otherwise). f16/bf16 compute in f32. The gradients
// are in unary_backward.cu (a file each, so the two compile in parallel).
#include <type_traits>

#include "brisk/kernels/device/pointwise.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/elementwise.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

namespace {

using brisk::cuda::detail::launch_elementwise;

// Kernel names for launch records and errors, indexed by UnaryOp.
constexpr const char* kForwardNames[] = {"neg",       "exp",        "log",  "sqrt",    "rsqrt", "abs", "relu",
                                         "gelu_tanh", "gelu_erf",   "silu", "sigmoid", "tanh",  "sin", "cos",
                                         "square",    "reciprocal", "sign", "log1p",   "expm1"};
static_assert(std::size(kForwardNames) == static_cast<size_t>(UnaryOp::Expm1) + 1);

// x, out: same shape and dtype T, any strides.
template <class T, UnaryOp Op>
void run_forward(const Tensor& x, const Tensor& out) {
  launch_elementwise<T, T>(kForwardNames[static_cast<int>(Op)], out, {&x}, device::UnaryFn<Op, acc_t<T>>{});
}

template <class T>
void forward_float(UnaryOp op, const Tensor& x, const Tensor& out) {
  switch (op) {
    case UnaryOp::Neg:
      return run_forward<T, UnaryOp::Neg>(x, out);
    case UnaryOp::Exp:
      return run_forward<T, UnaryOp::Exp>(x, out);
    case UnaryOp::Log:
      return run_forward<T, UnaryOp::Log>(x, out);
    case UnaryOp::Sqrt:
      return run_forward<T, UnaryOp::Sqrt>(x, out);
    case UnaryOp::Rsqrt:
      return run_forward<T, UnaryOp::Rsqrt>(x, out);
    case UnaryOp::Abs:
      return run_forward<T, UnaryOp::Abs>(x, out);
    case UnaryOp::Relu:
      return run_forward<T, UnaryOp::Relu>(x, out);
    case UnaryOp::GeluTanh:
      return run_forward<T, UnaryOp::GeluTanh>(x, out);
    case UnaryOp::GeluErf:
      return run_forward<T, UnaryOp::GeluErf>(x, out);
    case UnaryOp::Silu:
      return run_forward<T, UnaryOp::Silu>(x, out);
    case UnaryOp::Sigmoid:
      return run_forward<T, UnaryOp::Sigmoid>(x, out);
    case UnaryOp::Tanh:
      return run_forward<T, UnaryOp::Tanh>(x, out);
    case UnaryOp::Sin:
      return run_forward<T, UnaryOp::Sin>(x, out);
    case UnaryOp::Cos:
      return run_forward<T, UnaryOp::Cos>(x, out);
    case UnaryOp::Square:
      return run_forward<T, UnaryOp::Square>(x, out);
    case UnaryOp::Reciprocal:
      return run_forward<T, UnaryOp::Reciprocal>(x, out);
    case UnaryOp::Sign:
      return run_forward<T, UnaryOp::Sign>(x, out);
    case UnaryOp::Log1p:
      return run_forward<T, UnaryOp::Log1p>(x, out);
    case UnaryOp::Expm1:
      return run_forward<T, UnaryOp::Expm1>(x, out);
  }
}

template <class T>
void forward_int(UnaryOp op, const Tensor& x, const Tensor& out) {
  switch (op) {
    case UnaryOp::Neg:
      return run_forward<T, UnaryOp::Neg>(x, out);
    case UnaryOp::Abs:
      return run_forward<T, UnaryOp::Abs>(x, out);
    case UnaryOp::Relu:
      return run_forward<T, UnaryOp::Relu>(x, out);
    case UnaryOp::Square:
      return run_forward<T, UnaryOp::Square>(x, out);
    case UnaryOp::Sign:
      return run_forward<T, UnaryOp::Sign>(x, out);
    default:
      BRISK_THROW(op_name(op), ": not implemented for integer dtype ", dtype_name(x.dtype()));
  }
}

template <class T>
inline constexpr bool is_float_type_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  OpScope scope(op_name(op), &x);
  if (x.is_floating_point()) {
    visit_float(x.dtype(), x.device(), op_name(op), [&](auto t) { forward_float<decltype(t)>(op, x, out); });
  } else {
    visit_numeric(x.dtype(), x.device(), op_name(op), [&](auto t) {
      using T = decltype(t);
      if constexpr (!is_float_type_v<T>) forward_int<T>(op, x, out);
    });
  }
}

}  // namespace brisk::kernels::cuda
