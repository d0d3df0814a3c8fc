// Differentiable indexing and joining: cat/stack/split/chunk, index_select, gather, scatter,
// scatter_add, masked_fill, tril/triu, constant pad; and the integer-valued one_hot and
// multinomial. Index tensors are i32 or i64 and never receive gradients.
#pragma once
#include <vector>

#include "brisk/core/rng.h"
#include "brisk/core/tensor.h"

namespace brisk {

// Joins along an existing dim (sizes must match elsewhere, dtypes must be equal).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of consecutive pieces of `split_size` along dim (the last may be smaller).
// Note: split(x, {3}) picks this overload; pass std::vector<int64_t>{3} for one explicit size.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
// Views of pieces with the given sizes, which must sum to x.size(dim).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// split(x, ceil(size / chunks), dim): at most `chunks` views (fewer when the size runs out).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// x with dim `dim` indexed by a 0-d or 1-D index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j][k] = x[i][index[i][j][k]][k] (dim 1); output has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with out[i][index[i][j][k]][k] = src[i][j][k] (dim 1); duplicates: last wins.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// A copy of x with src added at the indexed positions (duplicates accumulate, in order).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// `value` where mask (bool, broadcast to x's shape) is true, x elsewhere.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Lower / upper triangle of the last two dims (diagonal offset k), zeros elsewhere.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);
// Constant padding in PyTorch's order {last_left, last_right, prev_left, ...}; negative crops.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0.0);

// i64 one-hot encoding with a trailing dim of num_classes (-1: max index + 1).
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
// num_samples i64 category draws per row of probs, (n) or (rows, n); reproducible per seed.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false, Generator* gen = nullptr);

}  // namespace brisk
