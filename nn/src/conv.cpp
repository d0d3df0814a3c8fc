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
  return conv2d(x, weight, bias,
                {.stride = options.stride, .padding = options.padding, .dilation = options.dilation, .groups = options.groups});
}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, kernel_, options_); }
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, kernel_, options_); }
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_); }

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
  BRISK_CHECK(x.dim() >= min_dim_ && x.dim() <= max_dim_ && x.size(1) == num_features, name(), ": expected a ",
              min_dim_ == max_dim_ ? std::to_string(min_dim_) : std::to_string(min_dim_) + " or " + std::to_string(max_dim_),
              "-D input with ", num_features, " channels in dim 1, got shape ", x.sizes());
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Shape bshape(static_cast<size_t>(x.dim()), 1);  // (1, C, 1, ...)
  bshape[1] = num_features;
  const bool use_batch = is_training() || !options.track_running_stats;
  Tensor mean_, var_;
  if (use_batch) {
    const int64_t count = x.numel() / num_features;
    BRISK_CHECK(count > 1 || !is_training(), name(), ": expected more than 1 value per channel when training, got shape ",
                x.sizes());
    mean_ = mean(x, dims, /*keepdim=*/true);
    var_ = var(x, dims, /*correction=*/0, /*keepdim=*/true);
    if (is_training() && options.track_running_stats) {
      NoGradGuard no_grad;
      const double m = options.momentum;
      Tensor bm = kernels::cast(mean_.detach(), running_mean.dtype()).as_strided({num_features}, {1}, 0);
      Tensor bv = kernels::binary_scalar(kernels::BinaryOp::Mul, var_.detach(),
                                         static_cast<double>(count) / static_cast<double>(count - 1));
      bv = kernels::cast(bv, running_var.dtype()).as_strided({num_features}, {1}, 0);
      kernels::mul_scalar_(running_mean, 1 - m);
      kernels::add_(running_mean, bm, m);
      kernels::mul_scalar_(running_var, 1 - m);
      kernels::add_(running_var, bv, m);
      kernels::add_(num_batches_tracked, ones({}, {.dtype = DType::I64}));
    }
  } else {
    mean_ = running_mean.view(bshape);
    var_ = running_var.view(bshape);
  }
  Tensor y = (x - mean_) * rsqrt(var_ + options.eps);
  if (weight.defined()) y = y * weight.view(bshape) + bias.view(bshape);
  return y;
}

}  // namespace brisk::nn
