// Differentiable reductions (sum, mean, prod, max/min, amax/amin, var/std, logsumexp), argmax/
// argmin, cumsum, topk, softmax and log_softmax. In every `dims` argument: empty = all dims,
// negative dims wrap, duplicates are an error. Semantics follow PyTorch.
#pragma once
#include <optional>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/kernels/reduce.h"  // ValuesIndices

namespace brisk {

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// The gradient is the product of the other elements (exact when x holds zeros).
Tensor prod(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// Largest / smallest value over dims; the gradient is split evenly among tied elements.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// max(x) / min(x): over everything, as amax(x) / amin(x).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// Along one dim: {values, indices (i64)}; the gradient goes to the one returned index.
//   auto [v, i] = max(logits, -1);
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
// i64; with no dim, the index into the flattened tensor. Not differentiable.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// sum((x - mean)^2) / max(0, n - correction); correction = 1 is Bessel's (unbiased) estimate.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
// The standard deviation, sqrt(var(...)). Named std_dev so it can be called unqualified under
// `using namespace brisk` (a bare `std(x)` would be ambiguous with namespace std); the method is
// x.std(...) as in libtorch, and brisk::std(x) stays for code written before the rename.
Tensor std_dev(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
inline Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
                  bool keepdim = false) {
  return std_dev(x, dims, correction, keepdim);
}
// log(sum(exp(x))) over dims, without overflow.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// Running sum along dim (integers give i64).
Tensor cumsum(const Tensor& x, int64_t dim);
// The k largest (or smallest) entries along dim, sorted by value (ties: lower index first);
// with sorted = false they come in index order. The gradient goes to the chosen indices.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

// exp(x) / sum(exp(x)) along dim, and its logarithm, computed with the max subtracted.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace brisk
