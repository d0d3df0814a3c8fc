// SGD with momentum, dampening, Nesterov and weight decay (PyTorch's update rule).
#pragma once
#include "brisk/optim/optimizer.h"

namespace brisk::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup<SGDOptions>> groups);
  const char* name() const override { return "SGD"; }

 private:
  static std::map<std::string, double> validate(const SGDOptions& o);
  void update() override;
};

}  // namespace brisk::optim
