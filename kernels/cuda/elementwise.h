// CUDA entry points of the elementwise family (internal): unary ops and their gradients, binary
// ops with broadcasting, comparisons, where, clamp and the in-place accumulations. Same contract
// as the CPU kernels in cpu/cpu_kernels.h: kernels/src/elementwise.cpp has validated the
// arguments, promoted the inputs to the compute dtype and allocated the outputs; these launch on
// the current stream of the tensors' device and never synchronise. See cuda/api.h.
#pragma once
#include <optional>

#include "brisk/kernels/elementwise.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// out = op(x); x and out of one dtype (float; or an integer for Neg, Abs, Relu, Square, Sign).
BRISK_CUDA_FN void unary(UnaryOp op, const Tensor& x, const Tensor& out) BRISK_CUDA_BODY;
// out = grad * op'(x) (written with =); grad, x, y and out of one float dtype and shape.
BRISK_CUDA_FN void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, const Tensor& out)
    BRISK_CUDA_BODY;
// out = a op b, a and b broadcast to out's shape, all three of out's dtype.
BRISK_CUDA_FN void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) BRISK_CUDA_BODY;
// out = a op s (or s op a), a of out's dtype.
BRISK_CUDA_FN void binary_scalar(BinaryOp op, const Tensor& a, double s, bool scalar_first, const Tensor& out)
    BRISK_CUDA_BODY;
// out (bool) = a cmp b; a and b of one dtype, broadcast to out's shape.
BRISK_CUDA_FN void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_FN void compare_scalar(CompareOp op, const Tensor& a, double s, const Tensor& out) BRISK_CUDA_BODY;
// out = cond ? a : b; cond bool or u8, a and b of out's dtype, all broadcast to out's shape.
BRISK_CUDA_FN void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_FN void clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi, const Tensor& out)
    BRISK_CUDA_BODY;
// out = grad where lo <= x <= hi, else 0 (written with =); grad, x and out of one float dtype.
BRISK_CUDA_FN void clamp_backward(const Tensor& grad, const Tensor& x, std::optional<double> lo,
                                  std::optional<double> hi, const Tensor& out) BRISK_CUDA_BODY;
// dst += alpha * src (src of dst's dtype, broadcast to dst's shape).
BRISK_CUDA_FN void add_(const Tensor& dst, const Tensor& src, double alpha) BRISK_CUDA_BODY;
// dst *= s
BRISK_CUDA_FN void mul_scalar_(const Tensor& dst, double s) BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
