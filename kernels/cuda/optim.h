// CUDA entry points of the optimizer family (internal): multi-tensor updates (a few launches per
// parameter list, see brisk/kernels/device/multi_tensor.h), norms reduced to a device scalar, and
// the fused unscale + inf/NaN check. See cuda/api.h for the conventions; kernels/src/optim.cpp
// validates (contiguous tensors on one GPU; one dtype per update call) and allocates outputs.
#pragma once
#include <cstdint>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/kernels/optim.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

enum class NormReduction : uint8_t { SumOfSquares, Norm2, MaxAbs };

BRISK_CUDA_API_BEGIN
// In place on every params[i] (and momentum_bufs[i]); grads read only. Lists of equal length,
// every tensor contiguous, one dtype (adam_step's copies: empty, or f16/bf16 copies of f32
// parameters written `=` in the same pass).
BRISK_CUDA_FN void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            const std::vector<Tensor>& momentum_bufs, const SgdHyper& h) BRISK_CUDA_BODY;
BRISK_CUDA_FN void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                             const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                             const std::vector<Tensor>& max_exp_avg_sqs, const AdamHyper& h,
                             const std::vector<Tensor>& copies) BRISK_CUDA_BODY;
// out: 0-d f64 on the tensors' GPU = sum of squares (Norm2: its square root) or max |x| over
// every element of every tensor (any floating dtypes, mixed). Per-block partials in a scratch
// buffer, then one block combines them in a fixed order: deterministic for given sizes.
BRISK_CUDA_FN void reduce_norm(const std::vector<Tensor>& tensors, NormReduction what, const Tensor& out)
    BRISK_CUDA_BODY;
// tensors[i] *= max_norm / (norm + 1e-6) when below 1; norm: 0-d f64 on the same GPU, read by
// the kernel (no host synchronisation).
BRISK_CUDA_FN void clip_grads_with_norm(const std::vector<Tensor>& tensors, double max_norm, const Tensor& norm)
    BRISK_CUDA_BODY;
// counter[0] += 1 (contiguous f64 on a GPU), one tiny launch.
BRISK_CUDA_FN void count_step(const Tensor& counter) BRISK_CUDA_BODY;
// grads *= inv_scale; found (0-d i32 on the same GPU) is zeroed, then set to 1 by any block that
// meets an inf/NaN result.
BRISK_CUDA_FN void unscale_and_check(const std::vector<Tensor>& grads, double inv_scale, const Tensor& found)
    BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
