// Short names for the plain kernel calls (no graph recorded) that the ops' backward formulas in
// autograd/src make, shared by the op files.
#pragma once
#include "brisk/kernels/elementwise.h"

namespace brisk::autograd::detail {

inline Tensor kmul(const Tensor& a, const Tensor& b) {
  return kernels::binary(kernels::BinaryOp::Mul, a, b);
}
inline Tensor kdiv(const Tensor& a, const Tensor& b) {
  return kernels::binary(kernels::BinaryOp::Div, a, b);
}
// A 0-d tensor of t's dtype and device holding `v`.
inline Tensor scalar_like(const Tensor& t, double v) {
  Tensor s = empty({}, t.dtype(), t.device());
  kernels::fill_(s, v);
  return s;
}

}  // namespace brisk::autograd::detail
