// CUDA entry points of the reduction family (internal): sum, mean, prod, amax/amin, max/min with
// indices, argmax/argmin, var/std and logsumexp over any set of dims of any strided input. The
// arguments are those of cpu/reduce_kernels.h; see cuda/api.h for the conventions. None of them
// synchronises with the host.
#pragma once
#include <vector>

#include "brisk/core/tensor.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// `reduced`: x.dim() flags, the dims to reduce. Outputs contiguous, kept dims in C order.
BRISK_CUDA_FN void sum(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_FN void mean(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_FN void prod(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_FN void amax(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_FN void amin(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) BRISK_CUDA_BODY;
// values may be undefined (argmax/argmin); indices i64. `op` names the public op in errors.
BRISK_CUDA_FN void arg_extreme(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool is_max,
                               const Tensor& values, const Tensor& indices) BRISK_CUDA_BODY;
BRISK_CUDA_FN void var(const Tensor& x, const std::vector<bool>& reduced, int64_t correction, bool take_sqrt,
                       const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_FN void logsumexp(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
