// Factories (PyTorch's names), in namespace brisk. TensorOptions (core/tensor.h) gives the dtype
// (get_default_dtype() unless set), device and requires_grad. Values are made on the tensor's device. Random
// factories draw from the counter-based generator (element i of a draw uses counter offset + i),
// so a seed gives the same values, bit for bit, on every device and thread count.
#pragma once
#include "brisk/core/rng.h"
#include "brisk/core/tensor.h"

namespace brisk {

Tensor zeros(const Shape& sizes, TensorOptions o = {});
Tensor ones(const Shape& sizes, TensorOptions o = {});
Tensor full(const Shape& sizes, double value, TensorOptions o = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor empty_like(const Tensor& t);
// [start, end) in steps of `step`; dtype defaults to i64 (pass {.dtype = F32} for floats).
Tensor arange(double start, double end, double step = 1.0, TensorOptions o = {.dtype = DType::I64});
Tensor arange(int64_t end, TensorOptions o = {.dtype = DType::I64});
// `steps` values evenly spaced from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions o = {});
// Uniform [0, 1), standard normal, and integers in [low, high).
Tensor rand(const Shape& sizes, TensorOptions o = {}, Generator* gen = nullptr);
Tensor randn(const Shape& sizes, TensorOptions o = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions o = {.dtype = DType::I64},
               Generator* gen = nullptr);
// A random permutation of 0..n-1 (i64).
Tensor randperm(int64_t n, Generator* gen = nullptr);
// In-place fills of a float tensor of any layout on any device (element i in row-major order
// gets draw i); not of a broadcast view, whose elements share memory.
void uniform_(const Tensor& t, double lo, double hi, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean, double std, Generator* gen = nullptr);

}  // namespace brisk
