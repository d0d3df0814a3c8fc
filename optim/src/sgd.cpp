// SGD: validation and the fused update.
#include "brisk/optim/sgd.h"

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/optim.h"

namespace brisk::optim {

std::map<std::string, double> SGD::validate(const SGDOptions& o) {
  BRISK_CHECK(o.lr >= 0, "SGD: Invalid learning rate: ", o.lr);
  BRISK_CHECK(o.momentum >= 0, "SGD: Invalid momentum value: ", o.momentum);
  BRISK_CHECK(o.weight_decay >= 0, "SGD: Invalid weight_decay value: ", o.weight_decay);
  BRISK_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening (momentum ", o.momentum, ", dampening ",
              o.dampening, ")");
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) {
  add_group(std::move(params), validate(options));
}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) {
  for (auto& g : groups) add_group(std::move(g.params), validate(g.options));
}

void SGD::update() {
  for (const Group& g : groups_) {
    const auto& h = g.hyper;
    const bool use_momentum = h.at("momentum") != 0.0;
    std::vector<Tensor> with_grad;
    for (const Tensor& p : g.params)
      if (p.grad().defined()) with_grad.push_back(p);
    for (const std::vector<Tensor>& same : by_dtype_and_device(with_grad)) {
      // Split by whether the momentum buffer is new: its first step copies the gradient in.
      std::vector<Tensor> ps[2], gs[2], bufs[2];
      for (const Tensor& p : same) {
        Tensor grad = p.grad();
        const int first = use_momentum && param_step(p) == 0 ? 1 : 0;
        ps[first].push_back(p);
        gs[first].push_back(kernels::contiguous(grad.dtype() == p.dtype() ? grad : kernels::cast(grad, p.dtype())));
        if (use_momentum) bufs[first].push_back(state(p, "momentum_buffer"));
        ++param_step(p);
      }
      for (int first : {0, 1}) {
        if (ps[first].empty()) continue;
        kernels::sgd_step(ps[first], gs[first], bufs[first],
                          {h.at("lr"), h.at("momentum"), h.at("dampening"), h.at("weight_decay"), h.at("nesterov") != 0,
                           h.at("maximize") != 0, first == 1});
      }
    }
  }
}

}  // namespace brisk::optim
