// Basic layers: Linear, Embedding, LayerNorm, Dropout, activations, Flatten.
// Options are plain structs with designated initialisers: nn::Linear fc(784, 10, {.bias = false}).
#pragma once
#include <string>

#include "brisk/autograd/ops_loss.h"
#include "brisk/core/rng.h"
#include "brisk/nn/module.h"

namespace brisk::nn {

struct LinearOptions {
  bool bias = true;
  DType dtype = get_default_dtype();  // set_default_dtype changes it
};

// y = x W^T + b; weight (out_features, in_features), bias (out_features).
// Init as PyTorch: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, LinearOptions options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  Tensor weight, bias;
  int64_t in_features, out_features;
};

struct EmbeddingOptions {
  int64_t padding_idx = -1;           // a row that gets no gradient (and starts at zero); -1: none
  DType dtype = get_default_dtype();  // set_default_dtype changes it
};

// Lookup table (num_embeddings, dim), init N(0, 1) as PyTorch.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {});
  Tensor forward(const Tensor& indices) override;
  Tensor weight;
  int64_t padding_idx;
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
};

// Normalises over the trailing `normalized_shape` dims; weight = 1, bias = 0 at init.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  Tensor forward(const Tensor& x) override;
  // {x + residual, this norm of it} as one op (brisk::add_layer_norm): a transformer's residual
  // add and the LayerNorm after it. With hooks on this module, the add and then a call of it.
  AddLayerNormOutput forward_residual(const Tensor& x, const Tensor& residual);
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};

// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p)).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};
class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::None) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) override;

 private:
  GeluApproximation approximate_;
};
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
};

// Flattens dims start_dim..end_dim (default: all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t start_dim_, end_dim_;
};

// Splits dim `dim` into `sizes` (one of them may be -1), the inverse of Flatten:
// nn::Unflatten(1, {2, 5}) maps (N, 10, ...) to (N, 2, 5, ...).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes) : dim_(dim), sizes_(std::move(sizes)) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t dim_;
  Shape sizes_;
};

}  // namespace brisk::nn
