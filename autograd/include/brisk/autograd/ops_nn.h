// Differentiable convolution, pooling and batch norm over NCHW tensors:
//   conv2d(x, w, b, {.stride = 2, .padding = {1, 0}, .groups = 4}), max_pool2d(x, 2),
//   avg_pool2d(x, 3, {.stride = 1, .padding = 1}), adaptive_avg_pool2d(x, {1, 1}),
//   batch_norm(x, running_mean, running_var, w, b, /*training=*/true).
// Options structs (Size2, Conv2dOptions, ...) live in brisk/kernels/conv.h.
#pragma once
#include <utility>

#include "brisk/core/tensor.h"
#include "brisk/kernels/conv.h"

namespace brisk {

// x: (N, C_in, H, W); weight: (C_out, C_in / groups, kH, kW); bias: (C_out) or undefined.
// Returns (N, C_out, OH, OW) with OH = (H + 2 * pad - dilation * (kH - 1) - 1) / stride + 1.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Conv2dOptions& o = {});

// The maximum of each window (padding never wins); the gradient flows to the argmax only.
Tensor max_pool2d(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o = {});
// Given a temporary that relu made (max_pool2d(relu(conv(x)), 2)), the same values, and in
// backward the pooling applies relu's mask itself on its (smaller) output and hands the gradient
// straight to relu's input: relu's backward, and the relu output it would keep, are skipped,
// with the same gradient bits (docs/how-brisk-works.md, "Reusing memory nobody else can see").
Tensor max_pool2d(Tensor&& x, Size2 kernel, const MaxPool2dOptions& o = {});
// Values and their i64 indices (h * W + w inside each input plane, as PyTorch).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o = {});

// The mean of each window; padded zeros count in the divisor unless count_include_pad is false.
Tensor avg_pool2d(const Tensor& x, Size2 kernel, const AvgPool2dOptions& o = {});

// Averages over PyTorch's adaptive windows so the output is (N, C, output.h, output.w).
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output);

// Normalises each channel (dim 1) of x: (N, C, ...), then scales by weight and shifts by bias
// ((C) each, or undefined), as PyTorch's F.batch_norm. training: the batch's mean and biased
// variance over every dim but 1, and the gradient flows through them; running_mean and
// running_var (C), when defined, are updated in place: running = (1 - momentum) * running +
// momentum * stat, with the unbiased variance. Otherwise the running statistics are used (and
// must be defined). Under autocast it runs in f32.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

}  // namespace brisk
