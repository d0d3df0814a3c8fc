// CPU implementations behind the public kernels (internal header, not installed).
// Each takes preallocated outputs; the public functions in kernels/src validate arguments,
// allocate, and switch on the device.
#pragma once
#include <optional>

#include "brisk/kernels/elementwise.h"
#include "cpu/isa.h"

namespace brisk::kernels::cpu {

// Declared once per instruction set; cpu::<name> calls the active one (cpu/isa.h).
// clang-format off
BRISK_CPU_KERNELS(
void unary(UnaryOp op, const Tensor& x, const Tensor& out);
void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, const Tensor& out);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);  // a, b same dtype as out
void binary_scalar(BinaryOp op, const Tensor& a, double s, bool scalar_first, const Tensor& out);
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void compare_scalar(CompareOp op, const Tensor& a, double s, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi, const Tensor& out);
void clamp_backward(const Tensor& grad, const Tensor& x, std::optional<double> lo, std::optional<double> hi,
                    const Tensor& out);
void copy(const Tensor& dst, const Tensor& src);  // src broadcast to dst, any dtypes
void fill(const Tensor& t, double v);
void add_(const Tensor& dst, const Tensor& src, double alpha);
void mul_scalar_(const Tensor& dst, double s);
)
// clang-format on

BRISK_CPU_DISPATCH_FN(unary);
BRISK_CPU_DISPATCH_FN(unary_backward);
BRISK_CPU_DISPATCH_FN(binary);
BRISK_CPU_DISPATCH_FN(binary_scalar);
BRISK_CPU_DISPATCH_FN(compare);
BRISK_CPU_DISPATCH_FN(compare_scalar);
BRISK_CPU_DISPATCH_FN(where);
BRISK_CPU_DISPATCH_FN(clamp);
BRISK_CPU_DISPATCH_FN(clamp_backward);
BRISK_CPU_DISPATCH_FN(copy);
BRISK_CPU_DISPATCH_FN(fill);
BRISK_CPU_DISPATCH_FN(add_);
BRISK_CPU_DISPATCH_FN(mul_scalar_);

}  // namespace brisk::kernels::cpu
