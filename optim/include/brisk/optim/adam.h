// Adam and AdamW (decoupled weight decay), with amsgrad, as PyTorch defines them.
#pragma once
#include <optional>
#include <utility>

#include "brisk/optim/optimizer.h"

namespace brisk::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};  // as PyTorch's betas=(beta1, beta2)
  // The older spelling of betas, still accepted: when set, each replaces its half of betas
  // (setting both spellings of one beta to different values is an error).
  std::optional<double> beta1 = std::nullopt, beta2 = std::nullopt;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  std::optional<double> beta1 = std::nullopt, beta2 = std::nullopt;  // as in AdamOptions
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup<AdamOptions>> groups);
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }

  // Hyper-parameter indices of a group (state dict names: lr, beta1, beta2, eps, weight_decay,
  // amsgrad, maximize) and state kinds (exp_avg, exp_avg_sq, max_exp_avg_sq).
  enum Hyper : size_t { kLr, kBeta1, kBeta2, kEps, kWeightDecay, kAmsgrad, kMaximize };
  enum State : size_t { kExpAvg, kExpAvgSq, kMaxExpAvgSq };

 protected:
  explicit Adam(bool decoupled);
  template <class Options>
  std::vector<double> validate(const Options& o) const;
  void update() override;
  bool decoupled_ = false;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
};

// The usual AdamW grouping (nanoGPT, Hugging Face's Trainer): `options` for the parameters with
// two or more dims (weight matrices, kernels, embeddings), the same without weight decay for the
// rest (biases, normalisation scales). Empty groups are left out.
std::vector<ParamGroup<AdamWOptions>> decay_matrices_only(const std::vector<Tensor>& params, AdamWOptions options);

}  // namespace brisk::optim
