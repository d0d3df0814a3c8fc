// SGD with momentum, dampening, Nesterov and weight decay (PyTorch's update rule).
#pragma once
#include <optional>

#include "brisk/optim/optimizer.h"

namespace brisk::optim {

struct SGDOptions {
  // Required, as in PyTorch (`torch::optim::SGDOptions(lr)`): a missing lr is an error naming it.
  std::optional<double> lr = std::nullopt;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<ParamGroup<SGDOptions>> groups);
  const char* name() const override { return "SGD"; }

  // Hyper-parameter indices of a group (state dict names: lr, momentum, dampening,
  // weight_decay, nesterov, maximize) and the state kind (momentum_buffer).
  enum Hyper : size_t { kLr, kMomentum, kDampening, kWeightDecay, kNesterov, kMaximize };
  enum State : size_t { kMomentumBuffer };

 private:
  SGD();
  static std::vector<double> validate(const SGDOptions& o);
  void update() override;
};

}  // namespace brisk::optim
