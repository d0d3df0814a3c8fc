// Adam and AdamW (decoupled weight decay), with amsgrad, as PyTorch defines them.
#pragma once
#include <optional>
#include <utility>

#include "brisk/kernels/optim.h"
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
  // For CUDA graphs (cuda::Graph): the step count and the learning rates live on the GPU, where the
  // update kernels read them, so a captured step() replays with the values of the moment (a
  // scheduler's set_lr writes the GPU copy, outside the capture). Needs every parameter on one GPU
  // and a gradient for every parameter at every step; the first step must run before capture.
  // No effect when the parameters are on the CPU. The same for every group of an optimizer.
  bool capturable = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  std::optional<double> beta1 = std::nullopt, beta2 = std::nullopt;  // as in AdamOptions
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
  bool capturable = false;  // as in AdamOptions
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup<AdamOptions>> groups);
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  // With capturable, the step counts come from the GPU (one host synchronisation).
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& sd) override;

  // Hyper-parameter indices of a group (state dict names: lr, beta1, beta2, eps, weight_decay,
  // amsgrad, maximize) and state kinds (exp_avg, exp_avg_sq, max_exp_avg_sq).
  enum Hyper : size_t { kLr, kBeta1, kBeta2, kEps, kWeightDecay, kAmsgrad, kMaximize };
  enum State : size_t { kExpAvg, kExpAvgSq, kMaxExpAvgSq };

 protected:
  explicit Adam(bool decoupled);
  template <class Options>
  std::vector<double> validate(const Options& o) const;
  void update() override;
  void lr_changed(size_t group) override;
  void set_capturable(bool capturable);
  bool decoupled_ = false;

 private:
  void update_capturable();
  void step_part(const std::vector<size_t>& part, const kernels::AdamHyper& hyper);
  // Writes the learning rates (and the step count when `step` >= 0) to scalars_ (not while capturing).
  void write_scalars(int64_t step);
  bool capturable_ = false;
  bool capturable_set_ = false;
  // Capturable on a GPU: f64 [step count, lr of group 0, lr of group 1, ...], made by the first step.
  Tensor scalars_;
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
