// Reductions over any set of dims (with keepdim), max/min with indices, var/std, cumsum, topk,
// softmax, log_softmax and logsumexp, plus the backward kernels autograd needs for them.
// Deterministic whatever the thread count: on the CPU each output element is reduced in a fixed
// order (by one thread, or in fixed 32Ki-element chunks folded in order for long runs); on the
// GPU in a fixed tree that depends only on the shape (no atomics), so GPU results match the CPU's
// exactly for max/min/argmax/topk and within rounding elsewhere. f32 sums accumulate in f64,
// f16/bf16 in f32 (on both devices); integer sums give i64.
#pragma once
#include <optional>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

// In every `dims` argument: empty = all dims, negative dims wrap, duplicates are an error.
// Floats keep their dtype; integers and bool sum (and prod) to i64.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);  // floats only
Tensor prod(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Largest / smallest value (NaN wins, as in PyTorch); same dtype as x.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Along one dim: values and the index of the first occurrence of the extreme value (i64).
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
// i64 indices; with no dim, the index into the flattened (C-order) tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Sum of squared deviations / max(0, n - correction) (two passes: mean first); floats only.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction = 1, bool keepdim = false);
// log(sum(exp(x))) computed as m + log(sum(exp(x - m))) with m the max; floats only.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// Running sum along dim (from the end when `reverse`, the gradient of cumsum); integers give i64.
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false);

// The k largest (or smallest) entries along dim and their indices. NaN counts as the largest
// value; ties go to the lower index first. sorted = false returns the k entries in index order.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// Numerically stable (max-subtracted) softmax and log_softmax along dim; floats only.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Given y = softmax(x): dx = y * (grad - sum(grad * y, dim)).
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);
// Given y = log_softmax(x): dx = grad - exp(y) * sum(grad, dim).
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim);

// The gradient of picking x at `indices` along dim (max/min along a dim, topk): a zero tensor of
// `in_sizes` with grad[..., j, ...] added at position indices[..., j, ...] along dim.
// grad and indices have the same shape, equal to in_sizes except along dim.
Tensor take_along_dim_backward(const Tensor& grad, const Tensor& indices, int64_t dim, const Shape& in_sizes);

}  // namespace brisk::kernels
