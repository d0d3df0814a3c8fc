// Basic layers over the differentiable ops.
#include "brisk/nn/layers.h"

#include <cmath>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/factory.h"
#include "brisk/nn/init.h"

namespace brisk::nn {

Linear::Linear(int64_t in, int64_t out, LinearOptions o) : in_features(in), out_features(out) {
  BRISK_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be positive, got ", in, " and ", out);
  weight = register_parameter("weight", empty({out, in}, o.dtype));
  if (o.bias) bias = register_parameter("bias", empty({out}, o.dtype));
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform_(a = sqrt(5)) reduces to U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double b = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -b, b);
  }
}

Tensor Linear::forward(const Tensor& x) {
  BRISK_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: expected input with last dim ", in_features,
              ", got shape ", x.sizes());
  return linear(x, weight, bias);
}

Embedding::Embedding(int64_t n, int64_t dim, EmbeddingOptions o) : padding_idx(o.padding_idx) {
  BRISK_CHECK(n > 0 && dim > 0, "Embedding: sizes must be positive, got ", n, " x ", dim);
  BRISK_CHECK(o.padding_idx < n, "Embedding: padding_idx ", o.padding_idx, " must be < num_embeddings ", n);
  weight = register_parameter("weight", empty({n, dim}, o.dtype));
  init::normal_(weight);
  if (padding_idx >= 0) init::zeros_(weight.select(0, padding_idx).detach());
}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(indices, weight, padding_idx);
}

LayerNorm::LayerNorm(Shape shape, LayerNormOptions o) : normalized_shape(std::move(shape)), eps(o.eps) {
  if (o.elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    if (o.bias) bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

AddLayerNormOutput LayerNorm::forward_residual(const Tensor& x, const Tensor& residual) {
  if (has_hooks()) {
    Tensor h = x + residual;
    return {h, (*this)(h)};
  }
  return add_layer_norm(x, residual, normalized_shape, weight, bias, eps);
}

Dropout::Dropout(double p_) : p(p_) {
  BRISK_CHECK(p >= 0 && p <= 1, "Dropout: probability must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p, is_training());
}

Tensor ReLU::forward(const Tensor& x) {
  return relu(x);
}
Tensor GELU::forward(const Tensor& x) {
  return gelu(x, approximate_);
}
Tensor SiLU::forward(const Tensor& x) {
  return silu(x);
}
Tensor Tanh::forward(const Tensor& x) {
  return tanh(x);
}
Tensor Sigmoid::forward(const Tensor& x) {
  return sigmoid(x);
}
Tensor Flatten::forward(const Tensor& x) {
  return flatten(x, start_dim_, end_dim_);
}

Tensor Unflatten::forward(const Tensor& x) {
  const int64_t d = dim_ < 0 ? dim_ + x.dim() : dim_;
  BRISK_CHECK(d >= 0 && d < x.dim(), "Unflatten: dim ", dim_, " is out of range for input of shape ", x.sizes());
  int64_t known = 1, unknown = 0;
  for (int64_t s : sizes_) {
    BRISK_CHECK(s > 0 || s == -1, "Unflatten: sizes must be positive or -1, got ", sizes_);
    if (s == -1)
      ++unknown;
    else
      known *= s;
  }
  BRISK_CHECK(!sizes_.empty() && unknown <= 1 && (unknown ? known > 0 && x.size(d) % known == 0 : known == x.size(d)),
              "Unflatten: sizes ", sizes_, " do not multiply to the size ", x.size(d), " of dim ", dim_,
              " of input shape ", x.sizes());
  Shape out(x.sizes().begin(), x.sizes().begin() + d);
  out.insert(out.end(), sizes_.begin(), sizes_.end());
  out.insert(out.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return x.reshape(out);
}

}  // namespace brisk::nn
