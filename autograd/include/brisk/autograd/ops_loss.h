// Differentiable neural-network functions: embedding, layer_norm, dropout, and the losses
// (cross_entropy fused with log-softmax, nll_loss, mse_loss, l1_loss,
// binary_cross_entropy_with_logits), with PyTorch's names, defaults and formulas.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "brisk/core/rng.h"
#include "brisk/core/tensor.h"

namespace brisk {

// weight[indices]: indices i32/i64 of any shape, weight (num_embeddings, dim); returns
// (indices.sizes()..., dim). The gradient is scatter-added into weight deterministically; the
// row padding_idx gets none (negative: no padding row).
Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx = -1);

// Normalises over the trailing dims normalized_shape (biased variance), then scales by weight
// and shifts by bias (each of shape normalized_shape, or undefined).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// A transformer's residual add and the LayerNorm after it as one op: h = x + residual and
// y = layer_norm(h, normalized_shape, weight, bias, eps), with the values (and gradients) of that
// composition, bit for bit on the CPU, in one pass over each row (kernels::add_layer_norm).
// Gradients flow to x, residual, weight and bias. x and residual must have the same shape; their
// dtypes promote as `x + residual` does (the narrower one is cast first, exactly). Under autocast
// with a 16-bit h (layer_norm would run in f32) it is the composition itself.
struct AddLayerNormOutput {
  Tensor h;  // x + residual
  Tensor y;  // layer_norm(h)
};
AddLayerNormOutput add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape,
                                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), double eps = 1e-5);

// Zeroes each element with probability p and scales the rest by 1 / (1 - p); the mask comes
// from the counter-based generator (default_generator() when gen is null). Returns x itself
// when !training or p == 0; p must be in [0, 1] (p == 1 gives zeros).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

struct CrossEntropyOptions {
  int64_t ignore_index = -100;            // targets equal to this contribute no loss and no gradient
  double label_smoothing = 0.0;           // in [0, 1]; cross_entropy only
  Reduction reduction = Reduction::Mean;  // Mean: over non-ignored targets (weighted: / sum of their weights)
  Tensor weight = Tensor();               // (C) per-class weights, or undefined (all 1); never gets a gradient
};

// logits (N, C) or (N, C, d1, ...) or (C); targets i32/i64 (N) or (N, d1, ...) or () with
// class indices. log-softmax and NLL in one fused kernel; with e = label_smoothing and w the
// class weights (1 when undefined), as PyTorch:
//   loss = (1 - e) * -w[target] * log_softmax(x)[target] + e / C * sum_c -w[c] * log_softmax(x)[c],
// and Mean divides the summed loss by the sum of w[target] over non-ignored positions.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options = {});
// loss = -w[target] * log_probs[target] per position; label_smoothing must be 0.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const CrossEntropyOptions& options = {});

// (input - target)^2 and |input - target|, reduced; input and target have the same shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

struct BCEWithLogitsOptions {
  Tensor weight = Tensor();      // broadcast to the logits' shape: scales each element's loss; or undefined
  Tensor pos_weight = Tensor();  // broadcast along the last dim (one per class): weighs the positive term; or undefined
  Reduction reduction = Reduction::Mean;
};
// Per element, as PyTorch (stable for any x), with p = pos_weight (1 when undefined), w = weight:
//   loss = w * ((1 - y) * x + (1 + (p - 1) * y) * (log(1 + exp(-|x|)) + max(-x, 0)))
// (= max(x, 0) - x * y + log(1 + exp(-|x|)) when p = w = 1); targets in [0, 1], same shape as
// logits. Gradients flow to logits and targets (not to weight or pos_weight).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const BCEWithLogitsOptions& options = {});
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, Reduction reduction);

}  // namespace brisk
