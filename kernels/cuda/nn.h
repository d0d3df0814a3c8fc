// CUDA entry points of the nn family (internal): embedding, layer norm, batch norm, dropout and
// the class losses, forward and backward. See cuda/api.h for the conventions. Inputs arrive
// contiguous unless a line says otherwise; index and target values stay on the device and bad
// ones are reported through the device-error slot. No entry point synchronises with the host.
#pragma once
#include <cstdint>

#include "brisk/core/tensor.h"
#include "brisk/kernels/nn.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

// (clang-format cannot parse the BRISK_CUDA_BODY declarations.)
BRISK_CUDA_API_BEGIN
// weight: (V, D); idx: (n) i32/i64 in [0, V); out: (n, D), `=`.
BRISK_CUDA_FN void embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) BRISK_CUDA_BODY;
// grad: (n, D); idx: (n); out: (V, D) of grad's dtype, fully written (`=`): row v sums the grad
// rows with index v in index order (a stable sort of idx, one thread per column of a run), or
// with atomicAdd when kernels::deterministic() is off; the padding_idx row stays zero.
BRISK_CUDA_FN void embedding_backward(const Tensor& grad, const Tensor& idx, int64_t padding_idx, const Tensor& out)
    BRISK_CUDA_BODY;

// x, y: (R, D); weight, bias: (D) or undefined; mean, rstd: (R) in the stat dtype (f64 or f32).
BRISK_CUDA_FN void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                              const Tensor& mean, const Tensor& rstd) BRISK_CUDA_BODY;
// grad, x: (R, D), R and D > 0; dx (R, D), dweight, dbias (D): each written (`=`) when defined.
BRISK_CUDA_FN void layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                       const Tensor& weight, const Tensor& dx, const Tensor& dweight,
                                       const Tensor& dbias) BRISK_CUDA_BODY;
// x, residual, h, y: (R, D): h = x + residual (rounded as the binary add), y = layer_norm(h), in
// one pass over each row (layer norm's kernels with the add in their loads); mean, rstd: (R).
BRISK_CUDA_FN void add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                                  double eps, const Tensor& h, const Tensor& y, const Tensor& mean, const Tensor& rstd)
    BRISK_CUDA_BODY;
// grad_y, h: (R, D), R and D > 0; grad_h: (R, D) or undefined. dinput = grad_h + layer norm's dx
// (one row kernel), dweight, dbias as layer_norm_backward; each written (`=`) when defined.
BRISK_CUDA_FN void add_layer_norm_backward(const Tensor& grad_y, const Tensor& grad_h, const Tensor& h,
                                           const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                                           const Tensor& dinput, const Tensor& dweight, const Tensor& dbias)
    BRISK_CUDA_BODY;

// x, y: (N, C, S); weight, bias, running_mean, running_var: (C) of x's dtype or undefined (the
// running stats updated in place when training); save_mean, save_invstd: (C) stat dtype, `=`.
BRISK_CUDA_FN void batch_norm(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight,
                              const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training,
                              double momentum, double eps, const Tensor& y, const Tensor& save_mean,
                              const Tensor& save_invstd) BRISK_CUDA_BODY;
// grad, x: (N, C, S); dx (N, C, S), dweight, dbias (C): each written (`=`) when defined.
BRISK_CUDA_FN void batch_norm_backward(const Tensor& grad, const Tensor& x, int64_t N, int64_t C, int64_t S,
                                       const Tensor& weight, const Tensor& save_mean, const Tensor& save_invstd,
                                       bool training, const Tensor& dx, const Tensor& dweight, const Tensor& dbias)
    BRISK_CUDA_BODY;

// x: (n); y: (n) and mask: (n) Bool, `=`; the draw of device/dropout.h.
BRISK_CUDA_FN void dropout(const Tensor& x, double p, uint64_t seed, uint64_t base, const Tensor& y, const Tensor& mask)
    BRISK_CUDA_BODY;
// grad, mask (Bool), out: one shape, any strides; out = mask ? grad * scale : 0.
BRISK_CUDA_FN void dropout_backward(const Tensor& grad, const Tensor& mask, double scale, const Tensor& out)
    BRISK_CUDA_BODY;

// logits: (N, C, S); targets: (N * S) i32/i64. Writes lse (N * S, stat dtype), count (0-d f64:
// targets != ignore_index) and loss: (N * S) for None, 0-d for Mean/Sum (reduced on the device, in
// f64), of the logits' dtype or f32 for 16-bit logits.
BRISK_CUDA_FN void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t C, int64_t S,
                                 int64_t ignore_index, double label_smoothing, Reduction reduction, const Tensor& loss,
                                 const Tensor& lse, const Tensor& count) BRISK_CUDA_BODY;
// grad: f64, (N * S) for None or 0-d; count: 0-d f64 (read for Mean only); out: (N, C, S), `=`:
// softmax recomputed from lse per element. out may be logits' own bytes (written in place).
BRISK_CUDA_FN void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& targets,
                                          const Tensor& lse, const Tensor& count, int64_t C, int64_t S,
                                          int64_t ignore_index, double label_smoothing, Reduction reduction,
                                          const Tensor& out) BRISK_CUDA_BODY;
// log_probs: (N, C, S); targets: (N * S); loss and count as cross_entropy's.
BRISK_CUDA_FN void nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index,
                            Reduction reduction, const Tensor& loss, const Tensor& count) BRISK_CUDA_BODY;
// grad and count as cross_entropy_backward's; out: (N, C, S), `=`: -scale at each target, else 0.
BRISK_CUDA_FN void nll_loss_backward(const Tensor& grad, const Tensor& targets, const Tensor& count, int64_t C,
                                     int64_t S, int64_t ignore_index, Reduction reduction, const Tensor& out)
    BRISK_CUDA_BODY;
BRISK_CUDA_API_END

}  // namespace brisk::kernels::cuda
