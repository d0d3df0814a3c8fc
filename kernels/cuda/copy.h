// CUDA entry points of the copy family (internal): dtype conversion, strided and broadcast
// copies within one GPU, and fills. See cuda/api.h for the conventions.
#pragma once
#include "brisk/core/tensor.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// dst[...] = src broadcast to dst's shape, converted to dst's dtype; both on the same GPU, any
// strides and dtypes.
BRISK_CUDA_FN void copy(const Tensor& dst, const Tensor& src) BRISK_CUDA_BODY;
// t[...] = v converted to t's dtype, any strides.
BRISK_CUDA_FN void fill(const Tensor& t, double v) BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
