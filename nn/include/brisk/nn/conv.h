// Convolution, pooling and batch-norm layers (NCHW).
#pragma once
#include "brisk/kernels/conv.h"
#include "brisk/nn/module.h"

namespace brisk::nn {

struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// weight (out, in/groups, kh, kw), bias (out); init as PyTorch (kaiming_uniform a=sqrt(5), bias U(+-1/sqrt(fan_in))).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  Tensor weight, bias;
  int64_t in_channels, out_channels;
  Size2 kernel_size;
  Conv2dOptions options;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, MaxPool2dOptions options = {}) : kernel_(kernel_size), options_(options) {}
  Tensor forward(const Tensor& x) override;

 private:
  Size2 kernel_;
  MaxPool2dOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, AvgPool2dOptions options = {}) : kernel_(kernel_size), options_(options) {}
  Tensor forward(const Tensor& x) override;

 private:
  Size2 kernel_;
  AvgPool2dOptions options_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size) : output_(output_size) {}
  Tensor forward(const Tensor& x) override;

 private:
  Size2 output_;
};

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch statistic
  bool affine = true;
  bool track_running_stats = true;
};

// Normalises each channel (dim 1) with the batch's statistics in training mode (updating the
// running mean and unbiased running variance) and with the running statistics in eval mode.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  int64_t num_features;
  BatchNormOptions options;

 protected:
  BatchNorm(int64_t num_features, BatchNormOptions options, int64_t min_dim, int64_t max_dim);

 private:
  int64_t min_dim_, max_dim_;
};

// Input (N, C) or (N, C, L).
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {}) : BatchNorm(num_features, options, 2, 3) {}
};

// Input (N, C, H, W).
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {}) : BatchNorm(num_features, options, 4, 4) {}
};

struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;  // added to one side of the output (each below stride or dilation)
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// The gradient of conv2d with respect to its input, as a layer (torch.nn.ConvTranspose2d):
// weight (in, out/groups, kh, kw), bias (out); output size (H - 1) stride - 2 padding +
// dilation (k - 1) + output_padding + 1. Computed with conv2d's kernels (its input gradient
// forward, conv2d and its weight gradient backward), on the CPU and the GPU.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, ConvTranspose2dOptions options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  Tensor weight, bias;
  int64_t in_channels, out_channels;
  Size2 kernel_size;
  ConvTranspose2dOptions options;
};

// conv_transpose2d(x, weight, bias, options) as the layer computes it (options.bias unused).
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose2dOptions& options = {});

// Zeroes whole channels: each (sample, channel) plane of x (N, C, H, W) or (C, H, W) is kept
// with probability 1 - p (scaled by 1 / (1 - p)) in training mode; the identity in eval mode.
class Dropout2d : public Module {
 public:
  explicit Dropout2d(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p;
};

}  // namespace brisk::nn
