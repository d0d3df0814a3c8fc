// CUDA entry points of fused scaled dot-product attention (internal; see cuda/api.h): the
// forward and backward of softmax(q k^T * scale) v in the flash-attention-2 manner, without the
// (T, T) scores ever reaching global memory. Arguments as kernels/src/attention.cpp prepares them:
// q, k, v (B, H, T, D) f32, f16 or bf16 of one dtype, the last dim contiguous, every other stride a
// multiple of 8 elements and 16-byte aligned data; D one of attention_head_dim_supported();
// outputs preallocated and contiguous. None of them synchronises with the host.
#pragma once
#include "brisk/core/tensor.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// out (B, H, Tq, D) = softmax(q k^T * scale [causal mask]) v; lse (B, H, Tq) f32 = the natural
// log of each row's sum of exp(scores), what the backward recomputes the probabilities from.
BRISK_CUDA_FN void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                                     const Tensor& out, const Tensor& lse) BRISK_CUDA_BODY;
// dq, dk, dv (like q, k, v, contiguous) written (=) from grad (like out) and the forward's out and
// lse. delta: (B, H, Tq) f32 scratch (rowsum(grad * out)). Deterministic: no atomics (dq has its
// own pass over the key tiles).
BRISK_CUDA_FN void attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& out, const Tensor& lse, bool causal, double scale, const Tensor& dq,
                                      const Tensor& dk, const Tensor& dv, const Tensor& delta) BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
