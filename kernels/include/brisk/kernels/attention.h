// Fused scaled dot-product attention (CUDA only): the forward and backward of
// softmax(q k^T * scale) v in the flash-attention-2 manner, for f16 and bf16 (tensor cores, f32
// accumulation) and f32 (plain f32 arithmetic) on a CUDA device, head dims 32, 64, 80, 96 and
// 128, causal or not. The (T, T) scores never reach memory: the
// forward keeps only the output and each row's logsumexp, which the backward recomputes the
// probabilities from. There is no CPU implementation (the autograd op computes attention in
// blocks of queries there, and for any shape or dtype these kernels do not take); callers ask
// fused_attention_supported() first. Deterministic: no atomics, the same bits run after run.
#pragma once
#include <string>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

// True when the fused kernels take q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, D): 4-dim
// tensors of one dtype f32, f16 or bf16 on one CUDA device, D in {32, 64, 80, 96, 128}, the
// same B and H, Tq, Tk >= 1 and Tq == Tk when causal, at most 65535 * 64 queries and keys. Any
// strides (the ops copy what the kernels cannot read in place). Otherwise `why` (when given)
// says what is not supported.
bool fused_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                               std::string* why = nullptr);

// Whether scaled_dot_product_attention may use the fused kernels: on unless the environment
// variable BRISK_CUDA_FUSED_ATTENTION is 0 (or false, off, no), read at each call, so that the
// fused and the blocked path can be compared in one process.
bool fused_attention_enabled();

struct AttentionForwardResult {
  Tensor out;  // (B, H, Tq, D) in (B, Tq, H, D) memory (as PyTorch's flash attention), q's dtype
  Tensor lse;  // (B, H, Tq) f32: log(sum over the visible keys of exp(scale * q . k))
};
// Throws brisk::Error unless fused_attention_supported(q, k, v, is_causal).
AttentionForwardResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                                         double scale);

struct AttentionGrads {
  Tensor dq, dk, dv;  // the shapes and dtype of q, k, v; fresh ones in (B, T, H, D) memory
};
// grad: the gradient of out (B, H, Tq, D); out and lse: attention_forward's results for the
// same q, k, v, is_causal and scale. `into` (optional): where to write dq, dk and dv instead of
// fresh tensors, each the shape, dtype and device of q, k, v with a contiguous last dim and even
// other strides (views of one packed qkv gradient, say); returned as given.
AttentionGrads attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, bool is_causal, double scale,
                                  const AttentionGrads* into = nullptr);

}  // namespace brisk::kernels
