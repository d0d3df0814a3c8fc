// CUDA entry points of the along-one-dim family (internal): softmax, log_softmax and their
// backward, cumsum, topk and take_along_dim_backward. The arguments are those of
// cpu/reduce_kernels.h (contiguous inputs, dim wrapped, outputs preallocated); see cuda/api.h.
// None of them synchronises with the host.
#pragma once
#include "brisk/core/tensor.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
BRISK_CUDA_FN void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& y) BRISK_CUDA_BODY;
BRISK_CUDA_FN void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& dx)
    BRISK_CUDA_BODY;
BRISK_CUDA_FN void cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& y) BRISK_CUDA_BODY;
BRISK_CUDA_FN void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted, const Tensor& values,
                        const Tensor& indices) BRISK_CUDA_BODY;
// out: fully written (zeros, then grad added at the indices, in index order per column, so
// repeated indices give the CPU's sums). An index out of range is reported through the device
// error slot (checked when the host next waits for the GPU) and skipped.
BRISK_CUDA_FN void take_along_dim_backward(const Tensor& grad, const Tensor& indices, int64_t dim, const Tensor& out)
    BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
