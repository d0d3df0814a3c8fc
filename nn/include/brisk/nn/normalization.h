// GroupNorm and RMSNorm, as torch.nn defines them, composed of differentiable ops (reshape,
// mean, var, rsqrt), so they run wherever those run (CPU and GPU) with no kernel of their own.
#pragma once
#include <optional>

#include "brisk/nn/module.h"

namespace brisk::nn {

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;  // per-channel weight (ones) and bias (zeros)
};

// x (N, C, *): the C channels in num_groups groups of C / num_groups; each (sample, group) is
// normalised by its own mean and biased variance, then scaled and shifted per channel.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  int64_t num_groups, num_channels;
  double eps;
};

struct RMSNormOptions {
  // Added to the mean square; unset: the input dtype's machine epsilon (as torch.nn.RMSNorm's
  // eps=None).
  std::optional<double> eps = std::nullopt;
  bool elementwise_affine = true;  // weight (ones) of normalized_shape
};

// y = x / sqrt(mean(x^2 over the trailing normalized_shape dims) + eps) * weight.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, RMSNormOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight;
  Shape normalized_shape;
  std::optional<double> eps;
};

}  // namespace brisk::nn
