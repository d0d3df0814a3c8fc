// Fused neural-network kernels with their backward passes: embedding lookup, layer norm, batch
// norm, dropout, and the class losses (cross entropy = log-softmax + NLL in one pass, and NLL).
// Every kernel reads any strides (copying to contiguous once when needed) and writes
// contiguous outputs; f16/bf16 compute in f32. Deterministic for any thread count (and on CUDA
// unless kernels::deterministic() is off, see brisk/kernels/settings.h). On CUDA, index and
// target values are checked on the device: a bad one is an error at the next synchronisation.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "brisk/core/rng.h"
#include "brisk/core/tensor.h"

namespace brisk::kernels {

// --- embedding ---------------------------------------------------------------------------
// out: (indices.sizes()..., D) = weight[indices]. indices: i32/i64, any shape, values in
// [0, V); weight: (V, D).
Tensor embedding(const Tensor& indices, const Tensor& weight);
// grad_weight: (V, D), row v = sum of grad rows whose index is v, summed in index order;
// the padding_idx row (when 0 <= padding_idx < V) stays zero. grad: (indices.sizes()..., D).
// On CUDA with kernels::deterministic() off, rows are added with atomicAdd in any order.
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx);

// --- layer norm ------------------------------------------------------------------------
struct LayerNormResult {
  Tensor y;     // x's shape, contiguous
  Tensor mean;  // (rows) where rows = x.numel() / prod(normalized_shape); f64 for f64 x, else f32
  Tensor rstd;  // (rows), 1 / sqrt(biased variance + eps)
};
// Normalises over the trailing dims `normalized_shape` of x; weight and bias have that shape
// or are undefined.
LayerNormResult layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           double eps);
struct LayerNormGrads {
  Tensor dx, dweight, dbias;  // undefined where not asked for
};
// needs = {x, weight, bias}. grad: x's shape; mean/rstd from layer_norm.
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, std::array<bool, 3> needs);

// --- batch norm ------------------------------------------------------------------------
struct BatchNormResult {
  Tensor y;            // x's shape, contiguous
  Tensor save_mean;    // (C): the batch mean (training) or running_mean (eval); f64 for f64 x, else f32
  Tensor save_invstd;  // (C): 1 / sqrt(var + eps), var the biased batch variance or running_var
};
// Normalises each channel (dim 1) of x: (N, C, ...) with at least 2 dims:
//   y = (x - mean[c]) * invstd[c] * weight[c] + bias[c]
// training: mean and biased variance over (N, ...) per channel; when running_mean and running_var
// are given they are updated in place: running = (1 - momentum) * running + momentum * stat,
// with the unbiased variance (needs more than one value per channel). eval: uses the running
// statistics (which must be given). weight, bias, running stats: (C) of x's dtype, or undefined.
BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, bool training, double momentum, double eps);
struct BatchNormGrads {
  Tensor dx, dweight, dbias;  // undefined where not asked for
};
// needs = {x, weight, bias}; grad: x's shape; save_mean/save_invstd from batch_norm with the
// same `training`. Training differentiates through the batch statistics; eval treats them as
// constants (dx = grad * weight * invstd).
BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                                   const Tensor& save_invstd, bool training, std::array<bool, 3> needs);

// --- dropout -------------------------------------------------------------------------------
struct DropoutResult {
  Tensor y;     // x * mask / (1 - p), contiguous (zeros when p == 1)
  Tensor mask;  // Bool, x's shape, contiguous: true where kept
};
// Element i is kept when the uniform float from Philox word (i % 4) of counter base + i / 4
// is >= p, where base = gen.reserve(ceil(numel / 4)): one draw of the counter-based
// generator, so a seed gives the same mask on every thread count. p in [0, 1].
DropoutResult dropout(const Tensor& x, double p, Generator* gen = nullptr);
Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double p);

// --- class losses ----------------------------------------------------------------------------
using brisk::Reduction;  // core/enums.h

struct ClassLossResult {
  Tensor loss;  // scalar for Mean/Sum, targets' shape for None; the input's dtype
  Tensor lse;   // cross_entropy only: log-sum-exp per position (targets' numel), f64 or f32
  // The number of targets that are not ignore_index (the Mean denominator): a 0-d f64 tensor on
  // the input's device, so that neither the loss nor its backward waits for the GPU
  // (count.item<double>() does).
  Tensor count;
};
// logits: (N, C, d1, ...) or (C); targets: i32/i64 (N, d1, ...) or () with values in [0, C)
// or ignore_index. Per position, with logp = log_softmax over C and e = label_smoothing:
//   loss = (1 - e) * -logp[target] + e / C * sum_c -logp[c]   (0 where target == ignore_index)
// Mean divides the sum by the number of non-ignored targets (NaN when there are none).
ClassLossResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                              Reduction reduction);
// d loss / d logits = scale * (softmax - (1 - e) * onehot(target) - e / C), 0 at ignored
// positions; scale = grad (per position for None), divided by count for Mean. Uses fwd's lse
// and count only (fwd.loss may be undefined).
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets,
                              const ClassLossResult& fwd, int64_t ignore_index, double label_smoothing,
                              Reduction reduction);
// log_probs: (N, C, d1, ...) or (C); loss = -log_probs[target] per position, reduced as above.
ClassLossResult nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, Reduction reduction);
// d loss / d log_probs: -scale at the target class, 0 elsewhere.
Tensor nll_loss_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets, const ClassLossResult& fwd,
                         int64_t ignore_index, Reduction reduction);

}  // namespace brisk::kernels
