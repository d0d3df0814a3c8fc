// CPU implementations of the indexing kernels (internal header, not installed). Arguments are
// already validated by kernels/src/index.cpp: index tensors are contiguous i64 with every value
// in range, outputs are preallocated.
#pragma once
#include <cstdint>

#include "brisk/core/tensor.h"

namespace brisk::kernels::cpu {

// x: contiguous, viewed as (pre, D, post); idx: (n); out: contiguous (pre, n, post).
void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);
// dst: contiguous (pre, D, post); idx: (n); src: contiguous (pre, n, post), dst's dtype.
void index_add(const Tensor& dst, int64_t dim, const Tensor& idx, const Tensor& src);
// x, out: any strides; idx: contiguous, out's shape.
void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);
// out: any strides (holds x already); idx: contiguous; src: any strides, at least idx's sizes.
void scatter(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src, bool accumulate);
// x, out: contiguous (..., R, C), same dtype.
void triangle(const Tensor& x, int64_t k, bool lower, const Tensor& out);
// idx: contiguous; out: contiguous zeros (idx.numel(), classes) i64.
void one_hot(const Tensor& idx, int64_t classes, const Tensor& out);
// probs: contiguous f64 (rows, n), validated; out: contiguous i64 (rows, num_samples).
void multinomial(const Tensor& probs, int64_t num_samples, bool replacement, uint64_t seed, uint64_t base,
                 const Tensor& out);

}  // namespace brisk::kernels::cpu
