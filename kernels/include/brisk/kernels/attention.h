// Fused scaled dot-product attention (CUDA only): the forward and backward of
// softmax(q k^T * scale) v in the flash-attention-2 manner, for f16 and bf16 (tensor cores, f32
// accumulation) and f32 (plain f32 arithmetic) on a CUDA device, head dims 32, 64, 80, 96 and
// 128, causal or not. The (T, T) scores never reach memory: the
// forward keeps only the output and each row's logsumexp, which the backward recomputes the
// probabilities from. Two implementations: cuDNN's fused attention (the default where it takes
// the problem) and brisk's own kernels (cuda/attention.cu), chosen by attention_backend(). There
// is no CPU implementation (the autograd op computes attention in blocks of queries there, and for
// any shape or dtype these kernels do not take); callers ask fused_attention_supported() first.
// brisk's kernels are deterministic (no atomics); cuDNN's backward is used under
// kernels::deterministic() only where it has a deterministic form (see cudnn_attention_supported).
#pragma once
#include <cstdint>
#include <optional>
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

// Which implementation runs attention on a CUDA device (docs/gpt2.md, "Attention backends"):
//   Cudnn: cuDNN's fused flash attention (forward and backward through cuDNN 9's graph API), where
//          cuDNN takes the problem; else brisk's kernels (the default).
//   Brisk: brisk's own fused kernels (cuda/attention.cu), the readable ones.
//   Math:  no fused kernel: the autograd op's blocked products and softmax.
// Each falls back to the next where it does not apply (the shape, the dtype, the device), so every
// setting runs every problem.
enum class AttentionBackend : uint8_t { Cudnn, Brisk, Math };

// "cudnn", "brisk", "math".
const char* attention_backend_name(AttentionBackend b);
// The backend named `name` (as above); throws brisk::Error naming `what` (the setting or the
// variable it came from) and listing the valid names otherwise.
AttentionBackend parse_attention_backend(const std::string& name, const char* what = "attention backend");

// The backend in force: the one set with set_attention_backend(), else the environment variable
// BRISK_CUDA_ATTENTION (cudnn, brisk or math; read at each call), else math when the older switch
// BRISK_CUDA_FUSED_ATTENTION is 0 (or false, off, no), else cudnn.
AttentionBackend attention_backend();
// Sets the backend for the whole process; std::nullopt returns to the environment and default.
void set_attention_backend(std::optional<AttentionBackend> b);

// Whether scaled_dot_product_attention may use a fused implementation (cuDNN's or brisk's):
// attention_backend() != Math.
bool fused_attention_enabled();

// True when cuDNN's fused attention is used for these inputs under the Cudnn backend (given that
// fused_attention_supported() holds): f16 or bf16, a GPU of compute capability 8.0 or newer, cuDNN
// 9.6 or newer at run time, head dim a multiple of 8 up to 128, strides multiples of 8 elements with
// a contiguous last dim and 16-byte aligned data. Under kernels::deterministic(), the backward also
// needs a GPU on which cuDNN has a deterministic attention backward (compute capability 9.x); when
// it has none, brisk's kernels (deterministic) run the backward. Otherwise `why` says what is not
// supported. cuDNN may still have no engine for a problem that passes: the op then falls back to
// brisk's kernels too, once per problem (the reason is cached with the plan).
bool cudnn_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal,
                               std::string* why = nullptr);

// Why the calling thread's last attention_forward or attention_backward did not run on cuDNN
// under the Cudnn backend (the reason cudnn_attention_supported() or the plan builder gave, or the
// determinism rule above); "" when it did, or when another backend is in force.
std::string attention_fallback_reason();

// The cuDNN plan cache's counters (brisk/kernels/attention_plan.h): plans built (one per distinct
// problem, including those cuDNN has no plan for) and calls that found theirs built.
struct AttentionPlanStats {
  int64_t built = 0;
  int64_t reused = 0;
};
AttentionPlanStats attention_plan_stats();
// Drops every cached plan and zeroes the counters (tests; plans are otherwise kept for the process).
void clear_attention_plans();

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
