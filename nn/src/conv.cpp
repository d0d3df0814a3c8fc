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

namespace {

kernels::Conv2dGrads run_conv_backward(const Tensor& grad_out, const Tensor& x, const Tensor& w,
                                       const brisk::Conv2dOptions& o, bool need_input, bool need_weight) {
  return kernels::conv2d_backward(grad_out, x, w, o, need_input, need_weight, false);
}

// y = conv2d's input gradient for grad_out x: x is (N, C_in, H, W), weight (C_in, C_out/g, kh, kw)
// is conv2d's (C_out', C_in'/g, kh, kw) with C_out' = C_in. Backward: grad_x = conv2d(grad_y, w);
// grad_w = conv2d's weight gradient with input grad_y and output gradient x.
struct ConvTranspose2dFn : autograd::Function<ConvTranspose2dFn> {
  static Tensor forward(autograd::FunctionCtx& ctx, const Tensor& x, const Tensor& w, const brisk::Conv2dOptions& o,
                        const Shape& out_sizes) {
    ctx.save_for_backward({x, w});
    ctx.values["sh"] = static_cast<double>(o.stride.h);
    ctx.values["sw"] = static_cast<double>(o.stride.w);
    ctx.values["ph"] = static_cast<double>(o.padding.h);
    ctx.values["pw"] = static_cast<double>(o.padding.w);
    ctx.values["dh"] = static_cast<double>(o.dilation.h);
    ctx.values["dw"] = static_cast<double>(o.dilation.w);
    ctx.values["g"] = static_cast<double>(o.groups);
    Tensor shape_only = empty(out_sizes, x.dtype(), x.device());  // conv2d_backward reads only its sizes
    return run_conv_backward(x.contiguous(), shape_only, w, o, true, false).input;
  }
  static std::vector<Tensor> backward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    const Tensor& x = ctx.saved()[0];
    const Tensor& w = ctx.saved()[1];
    auto v = [&](const char* k) { return static_cast<int64_t>(ctx.values.at(k)); };
    const brisk::Conv2dOptions o{
        .stride = {v("sh"), v("sw")}, .padding = {v("ph"), v("pw")}, .dilation = {v("dh"), v("dw")}, .groups = v("g")};
    Tensor gx, gw;
    if (ctx.needs_input_grad(0)) gx = kernels::conv2d(g[0], w, Tensor(), o);
    if (ctx.needs_input_grad(1)) gw = run_conv_backward(x.contiguous(), g[0], w, o, false, true).weight;
    return {gx, gw};
  }
};

}  // namespace

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvTranspose2dOptions& o) {
  BRISK_CHECK(x.dim() == 4 && weight.dim() == 4 && x.size(1) == weight.size(0), "conv_transpose2d: expected input (N, ",
              weight.dim() == 4 ? weight.size(0) : -1, ", H, W) for weight ", weight.sizes(), ", got input ",
              x.sizes());
  BRISK_CHECK(o.groups > 0 && x.size(1) % o.groups == 0, "conv_transpose2d: in_channels ", x.size(1),
              " must be divisible by groups ", o.groups);
  BRISK_CHECK(o.output_padding.h >= 0 && o.output_padding.w >= 0 &&
                  o.output_padding.h < std::max(o.stride.h, o.dilation.h) &&
                  o.output_padding.w < std::max(o.stride.w, o.dilation.w),
              "conv_transpose2d: output_padding ", o.output_padding, " must be below stride ", o.stride,
              " or dilation ", o.dilation);
  const int64_t oh =
      (x.size(2) - 1) * o.stride.h - 2 * o.padding.h + o.dilation.h * (weight.size(2) - 1) + o.output_padding.h + 1;
  const int64_t ow =
      (x.size(3) - 1) * o.stride.w - 2 * o.padding.w + o.dilation.w * (weight.size(3) - 1) + o.output_padding.w + 1;
  BRISK_CHECK(oh > 0 && ow > 0, "conv_transpose2d: output size (", oh, ", ", ow, ") is not positive for input ",
              x.sizes());
  const brisk::Conv2dOptions co{.stride = o.stride, .padding = o.padding, .dilation = o.dilation, .groups = o.groups};
  Tensor y = ConvTranspose2dFn::apply(x, weight, co, Shape{x.size(0), weight.size(1) * o.groups, oh, ow});
  return bias.defined() ? y + bias.view({1, bias.size(0), 1, 1}) : y;
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, ConvTranspose2dOptions o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  BRISK_CHECK(in > 0 && out > 0 && o.groups > 0 && in % o.groups == 0 && out % o.groups == 0,
              "ConvTranspose2d: in_channels ", in, " and out_channels ", out, " must be positive multiples of groups ",
              o.groups);
  BRISK_CHECK(k.h > 0 && k.w > 0, "ConvTranspose2d: kernel_size must be positive, got ", k);
  weight = register_parameter("weight", empty({in, out / o.groups, k.h, k.w}));
  if (o.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

// As PyTorch: kaiming_uniform(a = sqrt(5)) with fan_in from weight dim 1 (out/groups * kh * kw),
// bias U(+-1/sqrt(fan_in)).
void ConvTranspose2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    auto [fan_in, fan_out] = init::fan_in_and_fan_out(weight);
    double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -b, b);
  }
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight, bias, options);
}

Dropout2d::Dropout2d(double p_) : p(p_) {
  BRISK_CHECK(p >= 0 && p <= 1, "Dropout2d: probability must be in [0, 1], got ", p);
}

Tensor Dropout2d::forward(const Tensor& x) {
  BRISK_CHECK(x.dim() == 3 || x.dim() == 4, "Dropout2d: expected input (N, C, H, W) or (C, H, W), got shape ",
              x.sizes());
  if (!is_training() || p == 0) return x;
  Shape planes = x.sizes();
  for (int64_t d = x.dim() - 2; d < x.dim(); ++d) planes[static_cast<size_t>(d)] = 1;
  // One kept/dropped draw per plane, scaled by 1 / (1 - p): dropout of a tensor of ones.
  Tensor keep = dropout(ones(planes, {.dtype = x.dtype(), .device = x.device()}), p, true);
  return x * keep;
}

}  // namespace brisk::nn
