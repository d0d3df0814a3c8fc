// Elementwise kernels: unary and binary ops with NumPy broadcasting over arbitrary strides,
// comparisons, where, clamp, casts and copies. f16/bf16 load, compute in f32, store.
#pragma once
#include <optional>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

enum class UnaryOp : uint8_t {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Abs,
  Relu,
  GeluTanh,
  GeluErf,
  Silu,
  Sigmoid,
  Tanh,
  Sin,
  Cos,
  Square,
  Reciprocal,
  Sign,
  Log1p,
  Expm1,
};
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Maximum, Minimum };
enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(CompareOp op);

// y = op(x); float dtypes (Neg, Abs, Relu, Sign, Square also take integers). With `out`
// (contiguous, the result's shape and dtype, on x's device; it may be x itself) y is written
// there and returned.
Tensor unary(UnaryOp op, const Tensor& x, const Tensor& out = {});
// dx = grad * op'(x), given x and y = op(x) (either may be used). With `out` (contiguous,
// grad's shape and dtype; it may be grad itself) dx is written there and returned.
Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, const Tensor& out = {});
// out = a op b with broadcasting; mixed dtypes are promoted (promote_types).
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// out = a op s (or s op a when `scalar_first`), in a's dtype (an integer tensor with a
// fractional scalar gives f32).
Tensor binary_scalar(BinaryOp op, const Tensor& a, double s, bool scalar_first = false);
// Bool result, with broadcasting.
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);
Tensor compare_scalar(CompareOp op, const Tensor& a, double s);
// cond ? a : b with broadcasting over all three; cond is Bool (or u8).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// min(max(x, lo), hi); either bound may be absent.
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);
// grad where lo <= x <= hi, 0 elsewhere.
Tensor clamp_backward(const Tensor& grad, const Tensor& x, std::optional<double> lo, std::optional<double> hi);
// dst[...] = src broadcast to dst's shape, converted to dst's dtype; works across devices.
// Within a GPU the copy is enqueued on the current stream. Between the host and a GPU it is
// complete on return, unless non_blocking and the host side is pinned memory (then it is only
// enqueued: synchronise the stream before reading or reusing the host bytes).
void copy_(const Tensor& dst, const Tensor& src, bool non_blocking = false);
// A contiguous tensor with the same values (returns x itself if already contiguous).
Tensor contiguous(const Tensor& x);
// x with new sizes (the same number of elements): a view when its strides allow it, else a
// contiguous copy (no autograd history; autograd's reshape records one).
Tensor reshaped(const Tensor& x, const Shape& sizes);
// A contiguous copy in `dtype` (a copy even when the dtype is the same).
Tensor cast(const Tensor& x, DType dtype);
// A contiguous copy on `device` (non_blocking as in copy_).
Tensor to_device(const Tensor& x, Device device, bool non_blocking = false);
// t[...] = v
void fill_(const Tensor& t, double v);
// dst += alpha * src (src broadcast to dst's shape); the gradient accumulation primitive.
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);
// dst *= s
void mul_scalar_(const Tensor& dst, double s);

}  // namespace brisk::kernels
