// Fused optimizer updates: one pass over every parameter of a group, each element updated
// once, in place. Tensors are contiguous and f32/f64 (16-bit parameters are updated in f32).
#pragma once
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize, first_step;  // first_step: momentum buffers start as the gradient
};
// params[i] -= lr * update; momentum_bufs may be empty when momentum == 0.
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_bufs, const SgdHyper& h);

struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  // AdamW: p *= 1 - lr*wd; Adam: g += wd*p
  bool amsgrad, maximize;
  int64_t step;    // 1-based step count used for bias correction
};
// max_exp_avg_sqs empty unless amsgrad.
void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs, const AdamHyper& h);

// Sum of squares of every element of every tensor, accumulated in f64 in a fixed order.
double sum_of_squares(const std::vector<Tensor>& tensors);
// Largest |x| over every tensor (inf/nan propagate).
double max_abs(const std::vector<Tensor>& tensors);

}  // namespace brisk::kernels

namespace brisk::kernels {
// grads *= inv_scale in place, in one pass that also reports whether any element (before or
// after scaling) is inf or NaN: the GradScaler's unscale step.
bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale);
}  // namespace brisk::kernels
