// Differentiable views and copies: view/reshape, permute/transpose, narrow/slice, select,
// expand/broadcast_to, squeeze/unsqueeze, flatten (all without copying when possible),
// and contiguous, clone, to(dtype), to(device), detach.
#pragma once
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk {

// Views share storage with their input; the gradient flows back through the view.
Tensor view(const Tensor& x, const Shape& sizes);     // throws if the strides do not allow it
Tensor reshape(const Tensor& x, const Shape& sizes);  // a view when possible, else a copy
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// x[start:end:step] along dim (end clamped, negative start/end wrap); step >= 1.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, const Shape& sizes);
Tensor broadcast_to(const Tensor& x, const Shape& sizes);
Tensor squeeze(const Tensor& x, int64_t dim = kAllDims);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);

Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to(const Tensor& x, DType dtype);
// A copy on `device`, differentiable (the gradient is copied back to x's device). non_blocking:
// a copy from pinned host memory or within the GPU is only enqueued on the current stream.
Tensor to(const Tensor& x, Device device, bool non_blocking = false);

}  // namespace brisk
