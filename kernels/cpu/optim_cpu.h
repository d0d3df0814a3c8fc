// CPU implementations of the fused optimizer updates and gradient reductions (internal header,
// not installed). Arguments are validated by kernels/src/optim.cpp: contiguous tensors on the
// CPU, one dtype per update call, state lists empty or one tensor per parameter.
#pragma once
#include <vector>

#include "brisk/kernels/optim.h"
#include "cpu/isa.h"

namespace brisk::kernels::cpu {

// Declared once per instruction set; cpu::<name> calls the active one (cpu/isa.h).
// clang-format off
BRISK_CPU_KERNELS(
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_bufs, const SgdHyper& h);
void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs, const AdamHyper& h,
               const std::vector<Tensor>& copies);
double sum_of_squares(const std::vector<Tensor>& tensors);
double max_abs(const std::vector<Tensor>& tensors);
// tensors[i] *= coef (computed from norm as clip_grads_with_norm_ documents) when coef < 1.
void clip_grads_with_norm(const std::vector<Tensor>& tensors, double max_norm, double norm);
// Returns whether any scaled element is inf or NaN.
bool unscale_and_check(const std::vector<Tensor>& grads, double inv_scale);
)
// clang-format on

BRISK_CPU_DISPATCH_FN(sgd_step);
BRISK_CPU_DISPATCH_FN(adam_step);
BRISK_CPU_DISPATCH_FN(sum_of_squares);
BRISK_CPU_DISPATCH_FN(max_abs);
BRISK_CPU_DISPATCH_FN(clip_grads_with_norm);
BRISK_CPU_DISPATCH_FN(unscale_and_check);

}  // namespace brisk::kernels::cpu
