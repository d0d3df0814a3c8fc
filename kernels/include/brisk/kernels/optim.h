// Fused optimizer updates and gradient reductions: one pass over every tensor of a list, each
// element updated once, in place. Tensors are contiguous; in one update call every tensor (the
// parameters, their gradients and their state) has the parameters' dtype and device. f64 and f32
// compute in their own type; f16 and bf16 tensors are loaded into f32, updated and rounded once.
// On the GPU a call is a few multi-tensor launches for the whole list (not one per tensor), on
// the current stream, without host synchronisation unless a function says otherwise.
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
  int64_t step;  // 1-based step count used for bias correction
  // Capturable update (CUDA graphs): when defined, a contiguous f64 tensor on the parameters' GPU
  // holding the step count at element 0 and the learning rate at element lr_slot; the kernels read
  // both there at run time (instead of `step` and `lr`), so a captured update replays with the
  // values of the moment. Bias corrections are then computed on the device (pow may differ from
  // the host's in the last bit).
  Tensor device_scalars = Tensor();
  int64_t lr_slot = 1;
};
// max_exp_avg_sqs empty unless amsgrad. low_precision_copies: empty, or (f32 parameters only) one
// contiguous f16 or bf16 tensor per parameter, all of one dtype, shaped like it, into which the
// same pass writes the updated parameter rounded to that dtype: bit for bit cast(param, dtype),
// read once and written twice (f32 and 16-bit) instead of a second pass (autocast copies).
void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs, const AdamHyper& h,
               const std::vector<Tensor>& low_precision_copies = {});

// counter[0] += 1 where counter lives (a capturable optimizer's step count), without a host
// synchronisation. counter: a contiguous f64 tensor.
void count_step_(const Tensor& counter);

// The reductions below take tensors of any floating dtypes (mixed), all on one device, and
// accumulate in f64: per chunk, then the chunks' partial results in a fixed order, so a result
// does not depend on the thread count (CPU) or on timing (GPU).

// Sum of squares of every element of every tensor. On the GPU: one host synchronisation for the
// whole list (the result is read back once).
double sum_of_squares(const std::vector<Tensor>& tensors);
// Largest |x| over every tensor; NaN wins over any number; 0 for no elements. On the GPU: one
// host synchronisation for the whole list.
double max_abs(const std::vector<Tensor>& tensors);
// The total norm of all elements together (torch.nn.utils.get_total_norm): norm_type 2
// (sqrt(sum_of_squares)) or infinity (max_abs), as a 0-d f64 tensor on the tensors' device,
// with no host synchronisation. No tensors: a 0-d zero on the CPU.
Tensor total_norm(const std::vector<Tensor>& tensors, double norm_type);
// tensors[i] *= max_norm / (norm + 1e-6) when that factor is below 1, else nothing
// (torch.nn.utils.clip_grads_with_norm_). norm: a one-element floating tensor on the tensors'
// device (total_norm's result), read there: no host synchronisation.
void clip_grads_with_norm_(const std::vector<Tensor>& tensors, double max_norm, const Tensor& norm);

// grads *= inv_scale in place, in one pass that also reports whether any element (before or
// after scaling) is inf or NaN: the GradScaler's unscale step. On the GPU: one fused pass over
// every gradient and one host synchronisation per call (to read the flag).
bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale);

}  // namespace brisk::kernels
