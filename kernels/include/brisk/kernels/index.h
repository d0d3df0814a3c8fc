// Indexing and shaping kernels: cat/stack, index_select/index_add_, gather/scatter/scatter_add,
// masked_fill, tril/triu, constant pad, one_hot and multinomial. Index tensors are i32 or i64;
// float accumulation is sequential per output element, in index order. On the CPU indices are
// checked before any write; on CUDA they are checked on the device and a bad one is an error at
// the next synchronisation (the output is then unspecified), so no op waits for the GPU except
// one_hot with num_classes = -1.
#pragma once
#include <vector>

#include "brisk/core/rng.h"
#include "brisk/core/tensor.h"

namespace brisk::kernels {

// Concatenates along `dim`: same dtype and device, same sizes except `dim`. Output contiguous.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
// Joins equal-shaped tensors along a new dim `dim` (in [-(ndim+1), ndim]).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

// out = x with dim `dim` replaced by x[index[j]]; index: 0-d or 1-D, values in [0, x.size(dim)).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// dst[..., index[j], ...] += src[..., j, ...] in index order (deterministic; on CUDA with
// kernels::deterministic() off, atomicAdd in any order); src has dst's shape with size
// index.numel() at `dim`. dst: any layout, same dtype as src.
void index_add_(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);

// out[p] = x[p with coordinate `dim` replaced by index[p]]; index has x's ndim and
// index.size(d) <= x.size(d) for d != dim. Output has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with out[p with `dim` := index[p]] = src[p] for every position p of index
// (index.size(d) <= src.size(d) everywhere). Duplicate targets: the last along `dim` wins.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// Like scatter, but adds; duplicates accumulate in index order along `dim` (on CUDA with
// kernels::deterministic() off, atomicAdd in any order). Deterministic CUDA scatters give each
// line along `dim` to one thread: fast with many lines, slow for one long line.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// x where mask is false, `value` where true; mask (bool or u8) broadcasts to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Keep the lower (tril: col - row <= k) or upper (triu: col - row >= k) triangle of the last two
// dims, zero elsewhere; x has at least 2 dims.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);
// Constant padding, PyTorch order: pads = {last_left, last_right, prev_left, prev_right, ...};
// negative pads crop. At most 2 * ndim entries, an even count.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0.0);

// i64 tensor of shape indices.sizes() + [num_classes] with a 1 at each index, on the indices'
// device; num_classes -1 means max(indices) + 1 (on CUDA this reads the maximum back: a host
// synchronisation).
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
// Draws num_samples category indices (i64) per row of probs, (n) or (rows, n), weights >= 0
// (not necessarily normalised). Without replacement each row's draws are distinct. Draw s of
// row r uses Philox counter base + r * num_samples + s, so a seed gives the same samples on every
// device (the CUDA kernels share the CPU's arithmetic, device/index.h). Output on probs' device.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false, Generator* gen = nullptr);

}  // namespace brisk::kernels
