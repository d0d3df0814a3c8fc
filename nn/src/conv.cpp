// Convolution, pooling and batch-norm layers.
#include "brisk/nn/conv.h"

#include <cmath>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/reduce.h"
#include "brisk/nn/init.h"

namespace brisk::nn {

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Conv2dOptions o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  BRISK_CHECK(in > 0 && out > 0, "Conv2d: channel counts must be positive, got ", in, " and ", out);
  BRISK_CHECK(o.groups > 0 && in % o.groups == 0 && out % o.groups == 0, "Conv2d: groups ", o.groups,
              " must divide in_channels ", in, " and out_channels ", out);
  BRISK_CHECK(k.h > 0 && k.w > 0, "Conv2d: kernel size must be positive, got ", k);
  weight = register_parameter("weight", empty({out, in / o.groups, k.h, k.w}));
  if (o.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    auto [fan_in, fan_out] = init::fan_in_and_fan_out(weight);
    double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -b, b);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(
      x, weight, bias,
      {.stride = options.stride, .padding = options.padding, .dilation = options.dilation, .groups = options.groups});
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_, options_);
}
Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_, options_);
}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, output_);
}

BatchNorm::BatchNorm(int64_t n, BatchNormOptions o, int64_t min_dim, int64_t max_dim)
    : num_features(n), options(o), min_dim_(min_dim), max_dim_(max_dim) {
  BRISK_CHECK(n > 0, "BatchNorm: num_features must be positive, got ", n);
  if (o.affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  if (o.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({n}));
    running_var = register_buffer("running_var", ones({n}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::I64}));
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  BRISK_CHECK(
      x.dim() >= min_dim_ && x.dim() <= max_dim_ && x.size(1) == num_features, name(), ": expected a ",
      min_dim_ == max_dim_ ? std::to_string(min_dim_) : std::to_string(min_dim_) + " or " + std::to_string(max_dim_),
      "-D input with ", num_features, " channels in dim 1, got shape ", x.sizes());
  // Batch statistics when training, and in eval when no running statistics are kept.
  const bool use_batch = is_training() || !options.track_running_stats;
  BRISK_CHECK(x.numel() / num_features > 1 || !is_training(), name(),
              ": expected more than 1 value per channel when training, got shape ", x.sizes());
  // The running statistics (undefined unless tracked) are updated in training and read in eval.
  Tensor y = batch_norm(x, running_mean, running_var, weight, bias, use_batch, options.momentum, options.eps);
  if (is_training() && options.track_running_stats) {
    NoGradGuard no_grad;
    kernels::add_(num_batches_tracked, ones({}, {.dtype = DType::I64, .device = num_batches_tracked.device()}));
  }
  return y;
}

}  // namespace brisk::nn
