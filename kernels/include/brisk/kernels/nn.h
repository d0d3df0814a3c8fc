// Fused neural-network kernels with their backward passes: embedding lookup, layer norm, batch
// norm, dropout, and the class losses (cross entropy = log-softmax + NLL in one pass, and NLL).
// Every kernel reads any strides (copying to contiguous once when needed) and writes
// contiguous outputs; f16/bf16 compute in f32. Deterministic for any thread count (and on CUDA
// unless kernels::deterministic() is off, see brisk/kernels/settings.h). On CUDA, index and
// target values are checked on the device: a bad one is an error at the next synchronisation.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
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
// needs = {x, weight, bias}. grad: x's shape; mean/rstd from layer_norm. On CUDA, dx and the
// weight and bias sums come from one read of grad and x for rows of up to 16,384 values (4,096
// unaligned; BRISK_CUDA_FUSED_LN_BACKWARD=0, read at each call, runs the split kernels instead;
// both deterministic, in different summation orders).
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, std::array<bool, 3> needs);

// --- residual add + layer norm -------------------------------------------------------------
// A transformer's `h = x + residual; y = layer_norm(h)` in one pass over each row: x and residual
// are read once, h and y written once (the CPU adds a row into h and normalises it while it is
// in the cache; CUDA's layer-norm kernels load x + residual instead of x).
struct AddLayerNormResult {
  Tensor h;     // x + residual, x's shape, contiguous: each element rounded as `x + residual` rounds
                // it (the sum in f32 for f16/bf16, then one rounding), so bit for bit the add
  Tensor y;     // layer_norm(h), contiguous
  Tensor mean;  // (rows), as LayerNormResult
  Tensor rstd;  // (rows)
};
// x and residual: the same shape, dtype (f64, f32, f16, bf16; f64 on the CPU only) and device;
// normalized_shape, weight, bias, eps as layer_norm. y, mean and rstd are bit for bit those of
// layer_norm(x + residual) on the CPU (the same row code on the same h, any thread count), and on
// CUDA whenever x and residual start 16-byte aligned (fresh or contiguous tensors with such
// offsets): the fused launch then takes layer norm's own path for h (rows held in registers, a
// cluster or shared memory, or streamed) and sums in its order. Misaligned inputs stream, where
// layer_norm(h) might hold the row: the same values up to rounding, not the same bits. On CUDA,
// BRISK_CUDA_FUSED_RESIDUAL_LN=0 (or false, off, no; read at each call) runs the add and
// layer_norm's kernels instead, to measure one against the other.
AddLayerNormResult add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                  const Tensor& weight, const Tensor& bias, double eps);
// The backward of add_layer_norm. grad_y: the gradient of y; grad_h: of h, or undefined (none).
// needs = {input, weight, bias}; dx is the gradient of h's inputs (x and residual alike):
// grad_h + layer_norm_backward's dx, the latter rounded to the dtype before the sum, which is how
// the autograd engine adds h's two gradients in the unfused composition (so the result is its
// value; for f32 and f64 the extra rounding changes nothing). One pass over each row for dx;
// dweight and dbias are layer_norm_backward's deterministic column sums over (grad_y, h).
LayerNormGrads add_layer_norm_backward(const Tensor& grad_y, const Tensor& grad_h, const Tensor& h, const Tensor& mean,
                                       const Tensor& rstd, const Tensor& weight, std::array<bool, 3> needs);
// False when BRISK_CUDA_FUSED_RESIDUAL_LN is 0, false, off or no (read now); CUDA only.
bool fused_residual_layer_norm_enabled();

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
  Tensor loss;  // scalar for Mean/Sum, targets' shape for None; the input's dtype (or loss_dtype)
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
// loss_dtype: the loss's dtype, the logits' by default; f32 for f16/bf16 logits gives autocast's
// f32 loss straight from the 16-bit logits (read and accumulated in f32), with no f32 copy of the
// (positions x classes) logits, and cross_entropy_backward then writes a 16-bit gradient.
ClassLossResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing,
                              Reduction reduction, std::optional<DType> loss_dtype = std::nullopt);
// d loss / d logits = scale * (softmax - (1 - e) * onehot(target) - e / C), 0 at ignored
// positions; scale = grad (per position for None), divided by count for Mean. Uses fwd's lse
// and count only (fwd.loss may be undefined). `out`: where the gradient goes (logits' sizes and
// dtype, contiguous; a new tensor when undefined), which may be the logits' own bytes: one pass
// reads each logit and writes its gradient in its place, the same bits as out of place.
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets,
                              const ClassLossResult& fwd, int64_t ignore_index, double label_smoothing,
                              Reduction reduction, const Tensor& out = Tensor());
// log_probs: (N, C, d1, ...) or (C); loss = -log_probs[target] per position, reduced as above.
ClassLossResult nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, Reduction reduction);
// d loss / d log_probs: -scale at the target class, 0 elsewhere.
Tensor nll_loss_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets, const ClassLossResult& fwd,
                         int64_t ignore_index, Reduction reduction);

}  // namespace brisk::kernels
