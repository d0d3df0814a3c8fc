// Adam and AdamW (decoupled weight decay), with amsgrad, as PyTorch defines them.
#pragma once
#include "brisk/optim/optimizer.h"

namespace brisk::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
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

 protected:
  Adam(bool decoupled) : decoupled_(decoupled) {}
  static std::map<std::string, double> validate(double lr, double beta1, double beta2, double eps, double wd,
                                                bool amsgrad, bool maximize);
  void update() override;
  bool decoupled_ = false;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
};

}  // namespace brisk::optim
