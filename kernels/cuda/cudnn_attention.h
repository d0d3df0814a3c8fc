// cuDNN's fused attention (internal; see cuda/api.h): softmax(q k^T * scale [causal]) v forward
// and backward as cuDNN 9 graphs built with its backend descriptors, one execution plan per
// problem (brisk/kernels/attention_plan.h). Arguments as kernels/src/attention.cpp prepares them:
// q, k, v (B, H, T, D) f16 or bf16 with a contiguous last dim, other strides multiples of 8
// elements; outputs preallocated (any such strides); lse (B, H, Tq) f32 contiguous, the natural
// log of each row's sum of exp(scores), the same quantity brisk's kernels keep, so a forward by
// one backend and a backward by the other agree. None of them synchronises with the host.
#pragma once
#include <cstdint>
#include <string>

#include "brisk/core/tensor.h"
#include "brisk/kernels/attention.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// Why cuDNN's attention cannot run on `device` at all ("" when it can): compute capability below
// 8.0, or a cuDNN older than 9.6 loaded at run time.
BRISK_CUDA_FN std::string cudnn_attention_device_unsupported(int device) BRISK_CUDA_BODY;
// Whether cuDNN has a deterministic attention backward on `device` (compute capability 9.x: the
// graph that writes dQ from a dP workspace, without float atomics).
BRISK_CUDA_FN bool cudnn_attention_backward_deterministic(int device) BRISK_CUDA_BODY;
// out (B, H, Tq, D) and lse: enqueues the forward and returns true, or returns false with `why`
// (cuDNN has no plan for this problem, or its workspace cannot be allocated) having enqueued nothing.
BRISK_CUDA_FN bool cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                                           const Tensor& out, const Tensor& lse, std::string* why) BRISK_CUDA_BODY;
// dq, dk, dv (written, not added to) from grad and the forward's out and lse; true, or false with
// `why` as above. Under kernels::deterministic() only deterministic engines are used.
BRISK_CUDA_FN bool cudnn_attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& out, const Tensor& lse, bool causal, double scale,
                                            const Tensor& dq, const Tensor& dk, const Tensor& dv, std::string* why)
    BRISK_CUDA_BODY;
// The plan cache's counters since the process started (or the last reset), for tests.
BRISK_CUDA_FN AttentionPlanStats cudnn_attention_stats() BRISK_CUDA_BODY;
BRISK_CUDA_FN void cudnn_attention_reset_cache() BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
