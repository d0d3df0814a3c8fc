// Adam / AdamW: validation and the fused update.
#include "brisk/optim/adam.h"

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/optim.h"

namespace brisk::optim {

std::map<std::string, double> Adam::validate(double lr, double beta1, double beta2, double eps, double wd, bool amsgrad,
                                             bool maximize) {
  BRISK_CHECK(lr >= 0, "Adam: Invalid learning rate: ", lr);
  BRISK_CHECK(eps >= 0, "Adam: Invalid epsilon value: ", eps);
  BRISK_CHECK(beta1 >= 0 && beta1 < 1, "Adam: Invalid beta parameter at index 0: ", beta1);
  BRISK_CHECK(beta2 >= 0 && beta2 < 1, "Adam: Invalid beta parameter at index 1: ", beta2);
  BRISK_CHECK(wd >= 0, "Adam: Invalid weight_decay value: ", wd);
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", wd},
          {"amsgrad", amsgrad ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o) {
  add_group(std::move(params), validate(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize));
}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) {
  for (auto& g : groups) {
    const auto& o = g.options;
    add_group(std::move(g.params), validate(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize));
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o) : Adam(true) {
  add_group(std::move(params), validate(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize));
}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups) : Adam(true) {
  for (auto& g : groups) {
    const auto& o = g.options;
    add_group(std::move(g.params), validate(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad, o.maximize));
  }
}

void Adam::update() {
  for (const Group& g : groups_) {
    const auto& h = g.hyper;
    const bool amsgrad = h.at("amsgrad") != 0;
    // Parameters at the same step count share one fused call per dtype and device (step counts
    // differ only after a parameter missed a step for lack of a gradient).
    std::map<int64_t, std::vector<Tensor>> by_step;
    for (const Tensor& p : g.params)
      if (p.grad().defined()) by_step[++param_step(p)].push_back(p);
    for (auto& [step, at_step] : by_step) {
      for (const std::vector<Tensor>& ps : by_dtype_and_device(at_step)) {
        std::vector<Tensor> gs, m, v, vmax;
        for (const Tensor& p : ps) {
          Tensor grad = p.grad();
          gs.push_back(kernels::contiguous(grad.dtype() == p.dtype() ? grad : kernels::cast(grad, p.dtype())));
          m.push_back(state(p, "exp_avg"));
          v.push_back(state(p, "exp_avg_sq"));
          if (amsgrad) vmax.push_back(state(p, "max_exp_avg_sq"));
        }
        kernels::adam_step(ps, gs, m, v, vmax,
                           {h.at("lr"), h.at("beta1"), h.at("beta2"), h.at("eps"), h.at("weight_decay"), decoupled_,
                            amsgrad, h.at("maximize") != 0, step});
      }
    }
  }
}

}  // namespace brisk::optim
