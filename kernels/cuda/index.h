// CUDA entry points of the index family (internal): index_select, index_add_, gather, scatter,
// scatter_add, masked_fill, tril/triu, one_hot and multinomial. See cuda/api.h for the
// conventions. Index tensors are i32 or i64 and stay on the device: a value out of range is
// reported through the device-error slot (an error at the next host synchronisation naming the
// op), never checked by copying indices to the host; the output is then unspecified but no
// kernel reads or writes out of bounds.
#pragma once
#include <cstdint>

#include "brisk/core/tensor.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

// (clang-format cannot parse the BRISK_CUDA_BODY declarations.)
BRISK_CUDA_API_BEGIN
// x: contiguous, at least 1-D, viewed as (pre, D, post) around `dim`; idx: contiguous (n);
// out: contiguous (pre, n, post) of x's dtype, written with `=`.
BRISK_CUDA_FN void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) BRISK_CUDA_BODY;
// dst: contiguous (pre, D, post), updated with `+=`; idx: contiguous (n); src: contiguous
// (pre, n, post) of dst's dtype. Deterministic (each destination element adds its sources in
// index order, as the CPU) unless kernels::deterministic() is off, when float and i32/i64 types
// use atomicAdd.
BRISK_CUDA_FN void index_add(const Tensor& dst, int64_t dim, const Tensor& idx, const Tensor& src) BRISK_CUDA_BODY;
// x: at least 1-D, any strides; idx: x's ndim, any strides; out: contiguous, idx's shape, `=`.
BRISK_CUDA_FN void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) BRISK_CUDA_BODY;
// out: contiguous (already holding x), updated in place; idx: any strides, out's ndim; src: any
// strides, at least idx's sizes. accumulate = false: the last index along `dim` wins (one thread
// per line along `dim`, in order); true: adds in index order, or with atomicAdd when
// kernels::deterministic() is off (float and i32/i64 types).
BRISK_CUDA_FN void scatter(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src, bool accumulate)
    BRISK_CUDA_BODY;
// out = mask ? value : x over out's shape (x's); mask (bool or u8) broadcasts; any strides.
BRISK_CUDA_FN void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) BRISK_CUDA_BODY;
// x, out: contiguous (..., R, C) of one dtype; keeps col - row <= k (lower) or >= k, zeros the rest.
BRISK_CUDA_FN void triangle(const Tensor& x, int64_t k, bool lower, const Tensor& out) BRISK_CUDA_BODY;
// The largest value of a non-empty contiguous index tensor. Synchronises with the host (one_hot
// needs it to size its output when num_classes is -1).
BRISK_CUDA_FN int64_t index_max(const Tensor& idx) BRISK_CUDA_BODY;
// idx: contiguous (n); out: contiguous i64 (n, classes), fully written: zeros and a 1 per row.
BRISK_CUDA_FN void one_hot(const Tensor& idx, int64_t classes, const Tensor& out) BRISK_CUDA_BODY;
// probs: contiguous f64 (rows, n), a scratch copy the kernels may overwrite; out: contiguous i64
// (rows, num_samples). Rows are validated on the device (finite, non-negative, a positive total,
// enough positive weights without replacement); draws match the CPU's bit for bit.
BRISK_CUDA_FN void multinomial(const Tensor& probs, int64_t num_samples, bool replacement, uint64_t seed, uint64_t base,
                               const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
