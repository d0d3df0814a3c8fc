// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
#pragma once
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::optim {

// Scales every gradient by min(1, max_norm / (total_norm + 1e-6)) and returns the total norm
// over all gradients together (norm_type 2 or infinity). Non-finite norms are returned and,
// with error_if_nonfinite, throw. On a GPU the norm is computed and applied on the device (fused
// kernels over all gradients, no host round trip per tensor); the one host synchronisation is
// reading the norm to return it. Gradients on several devices cost one read per device.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// The same, returning the total norm as a 0-d f64 tensor instead of reading it: on the gradients'
// device when they are on one (no host synchronisation unless error_if_nonfinite, so a CUDA graph
// can capture it, as PyTorch's clip_grad_norm_, which returns a tensor); on the CPU when they span
// several devices (each device's norm read once). No gradients: a CPU zero.
Tensor clip_grad_norm_tensor_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                              bool error_if_nonfinite = false);
// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace brisk::optim
