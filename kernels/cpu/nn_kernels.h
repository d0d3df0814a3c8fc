// CPU implementations behind kernels/nn.h (internal header, not installed). Inputs are
// contiguous and already validated (index values in range); outputs are preallocated.
#pragma once
#include <cstdint>

#include "brisk/core/tensor.h"
#include "cpu/isa.h"

namespace brisk::kernels::cpu {

// Declared once per instruction set; cpu::<name> calls the active one (cpu/isa.h).
// clang-format off
BRISK_CPU_KERNELS(
// idx: (n) i64; weight: (V, D); out: (n, D).
void embedding(const Tensor& idx, const Tensor& weight, const Tensor& out);
// grad: (n, D); idx: (n) i64; out: (V, D) of grad's dtype, fully written.
void embedding_backward(const Tensor& grad, const Tensor& idx, int64_t padding_idx, const Tensor& out);

// x, y: (R, D); weight, bias: (D) or undefined; mean, rstd: (R) in acc dtype (f64 or f32).
void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd);
// grad, x: (R, D); dx (R, D), dweight, dbias (D): each written when defined.
void layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
// x, residual, h, y: (R, D); h = x + residual (rounded as the binary add), then y = layer_norm(h)
// with its mean and rstd, bit for bit as layer_norm on h.
void add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias, double eps,
                    const Tensor& h, const Tensor& y, const Tensor& mean, const Tensor& rstd);
// grad_y, h: (R, D); grad_h: (R, D) or undefined. dinput = grad_h + layer_norm_backward's dx (the
// latter rounded to the dtype first), dweight, dbias as layer_norm_backward; each when defined.
void add_layer_norm_backward(const Tensor& grad_y, const Tensor& grad_h, const Tensor& h, const Tensor& mean,
                             const Tensor& rstd, const Tensor& weight, const Tensor& dinput, const Tensor& dweight,
                             const Tensor& dbias);

// x, y: (N, C, S) contiguous; weight, bias, running_mean, running_var: (C) of x's dtype or
// undefined; save_mean, save_invstd: (C) in the stat dtype (f64 or f32). Training computes the
// batch statistics (and updates the running ones when defined), eval reads the running ones.
void batch_norm(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight, const Tensor& bias,
                const Tensor& running_mean, const Tensor& running_var, bool training, double momentum, double eps,
                const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd);
// grad, x: (N, C, S) contiguous; dx (N, C, S), dweight, dbias (C): each written when defined.
void batch_norm_backward(const Tensor& grad, const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias);

// x, y, mask (Bool): same numel. See kernels::dropout for the draw.
void dropout(const Tensor& x, double p, uint64_t seed, uint64_t base, const Tensor& y, const Tensor& mask);
// out = grad * mask * scale; all (n).
void dropout_backward(const Tensor& grad, const Tensor& mask, double scale, const Tensor& out);

// logits: (N, C, S); targets: (N * S) i64. Writes the per-position loss (0 where ignored) to
// row_loss[N * S] and the log-sum-exp to lse (N * S) (f64 for f64 logits, else f32).
void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index,
                   double label_smoothing, double* row_loss, const Tensor& lse);
// out: (N, C, S) = scale[pos] * (softmax - (1-e) onehot - e/C), 0 at ignored positions.
// scale: one value per position (n_scale == N * S) or one for all (n_scale == 1). out may be the
// logits themselves: each element is read, then its gradient written in its place.
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, int64_t C, int64_t S,
                            int64_t ignore_index, double label_smoothing, const double* scale, int64_t n_scale,
                            const Tensor& out);
// log_probs: (N, C, S); row_loss[pos] = -log_probs[target] (0 where ignored).
void nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index,
              double* row_loss);
// out: (N, C, S) zeros except -scale at each non-ignored target.
void nll_loss_backward(const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index, const double* scale,
                       int64_t n_scale, const Tensor& out);
)
// clang-format on

BRISK_CPU_DISPATCH_FN(embedding);
BRISK_CPU_DISPATCH_FN(embedding_backward);
BRISK_CPU_DISPATCH_FN(layer_norm);
BRISK_CPU_DISPATCH_FN(layer_norm_backward);
BRISK_CPU_DISPATCH_FN(add_layer_norm);
BRISK_CPU_DISPATCH_FN(add_layer_norm_backward);
BRISK_CPU_DISPATCH_FN(batch_norm);
BRISK_CPU_DISPATCH_FN(batch_norm_backward);
BRISK_CPU_DISPATCH_FN(dropout);
BRISK_CPU_DISPATCH_FN(dropout_backward);
BRISK_CPU_DISPATCH_FN(cross_entropy);
BRISK_CPU_DISPATCH_FN(cross_entropy_backward);
BRISK_CPU_DISPATCH_FN(nll_loss);
BRISK_CPU_DISPATCH_FN(nll_loss_backward);

}  // namespace brisk::kernels::cpu
