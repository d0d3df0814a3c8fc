// GroupNorm and RMSNorm from differentiable ops.
#include "brisk/nn/normalization.h"

#include <limits>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/factory.h"

namespace brisk::nn {

GroupNorm::GroupNorm(int64_t groups, int64_t channels, GroupNormOptions o)
    : num_groups(groups), num_channels(channels), eps(o.eps) {
  BRISK_CHECK(groups > 0 && channels > 0 && channels % groups == 0, "GroupNorm: num_channels ", channels,
              " must be a positive multiple of num_groups ", groups);
  if (o.affine) {
    weight = register_parameter("weight", ones({channels}));
    bias = register_parameter("bias", zeros({channels}));
  }
}

Tensor GroupNorm::forward(const Tensor& x) {
  BRISK_CHECK(x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm: expected input (N, ", num_channels,
              ", *), got shape ", x.sizes());
  const int64_t n = x.size(0);
  Tensor g = x.reshape({n, num_groups, -1});
  Tensor mu = mean(g, {2}, true);
  Tensor v = var(g, {2}, 0, true);
  Tensor y = ((g - mu) * rsqrt(v + eps)).reshape(x.sizes());
  if (!weight.defined()) return y;
  Shape per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = num_channels;
  return y * weight.view(per_channel) + bias.view(per_channel);
}

RMSNorm::RMSNorm(Shape shape, RMSNormOptions o) : normalized_shape(std::move(shape)), eps(o.eps) {
  for (int64_t s : normalized_shape)
    BRISK_CHECK(s > 0, "RMSNorm: normalized_shape must be positive, got ", normalized_shape);
  if (o.elementwise_affine) weight = register_parameter("weight", ones(normalized_shape));
}

namespace {

double machine_epsilon(DType dt) {
  switch (dt) {
    case DType::F64:
      return std::numeric_limits<double>::epsilon();
    case DType::F16:
      return 0.0009765625;  // 2^-10
    case DType::BF16:
      return 0.0078125;  // 2^-7
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

}  // namespace

Tensor RMSNorm::forward(const Tensor& x) {
  const auto k = static_cast<int64_t>(normalized_shape.size());
  bool ok = x.dim() >= k;
  for (int64_t d = 0; ok && d < k; ++d) ok = x.size(x.dim() - k + d) == normalized_shape[static_cast<size_t>(d)];
  BRISK_CHECK(ok, "RMSNorm: input shape ", x.sizes(), " does not end with normalized_shape ", normalized_shape);
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = x * rsqrt(mean(x * x, dims, true) + eps.value_or(machine_epsilon(x.dtype())));
  return weight.defined() ? y * weight : y;
}

}  // namespace brisk::nn
