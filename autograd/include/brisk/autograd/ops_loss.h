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

// Zeroes each element with probability p and scales the rest by 1 / (1 - p); the mask comes
// from the counter-based generator (default_generator() when gen is null). Returns x itself
// when !training or p == 0; p must be in [0, 1] (p == 1 gives zeros).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);

struct CrossEntropyOptions {
  int64_t ignore_index = -100;   // targets equal to this contribute no loss and no gradient
  double label_smoothing = 0.0;  // in [0, 1]; cross_entropy only
  std::string reduction = "mean";  // "mean" (over non-ignored targets), "sum" or "none"
};

// logits (N, C) or (N, C, d1, ...) or (C); targets i32/i64 (N) or (N, d1, ...) or () with
// class indices. log-softmax and NLL in one fused kernel; with e = label_smoothing:
//   loss = (1 - e) * -log_softmax(x)[target] + e / C * sum_c -log_softmax(x)[c].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options = {});
// loss = -log_probs[target] per position; label_smoothing must be 0.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const CrossEntropyOptions& options = {});

// (input - target)^2 and |input - target|, reduced; input and target have the same shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean");
// max(x, 0) - x * y + log(1 + exp(-|x|)) per element (stable for any x); targets in [0, 1],
// same shape as logits. Gradients: sigmoid(x) - y for logits, -x for targets.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        std::string_view reduction = "mean");

}  // namespace brisk
