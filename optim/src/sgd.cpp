// SGD: validation and the fused update.
#include "brisk/optim/sgd.h"

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/optim.h"

namespace brisk::optim {

SGD::SGD() : Optimizer({"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"}, {"momentum_buffer"}) {}

std::vector<double> SGD::validate(const SGDOptions& o) {
  BRISK_CHECK(o.lr.has_value(),
              "SGD: the learning rate is required (SGD has no default lr, as in PyTorch): pass {.lr = ...}");
  const double lr = *o.lr;
  BRISK_CHECK(lr >= 0, "SGD: Invalid learning rate: ", lr);
  BRISK_CHECK(o.momentum >= 0, "SGD: Invalid momentum value: ", o.momentum);
  BRISK_CHECK(o.weight_decay >= 0, "SGD: Invalid weight_decay value: ", o.weight_decay);
  BRISK_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
              "SGD: Nesterov momentum requires a momentum and zero dampening (momentum ", o.momentum, ", dampening ",
              o.dampening, ")");
  std::vector<double> h(6);
  h[kLr] = lr;
  h[kMomentum] = o.momentum;
  h[kDampening] = o.dampening;
  h[kWeightDecay] = o.weight_decay;
  h[kNesterov] = o.nesterov ? 1.0 : 0.0;
  h[kMaximize] = o.maximize ? 1.0 : 0.0;
  return h;
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : SGD() {
  check_params(params);
  add_group(std::move(params), validate(options));
}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) : SGD() {
  for (auto& g : groups) {
    check_params(g.params);
    add_group(std::move(g.params), validate(g.options));
  }
}

void SGD::update() {
  std::vector<size_t> with_grad;
  for (const Group& g : groups_) {
    const std::vector<double>& h = g.hyper;
    const bool use_momentum = h[kMomentum] != 0.0;
    with_grad.clear();
    for (size_t j = 0; j < g.params.size(); ++j)
      if (g.params[j].grad().defined()) with_grad.push_back(g.first + j);
    for (const std::vector<size_t>& same : by_dtype_and_device(with_grad)) {
      // Split by whether the momentum buffer is new: its first step copies the gradient in.
      std::vector<Tensor> ps[2], gs[2], bufs[2];
      for (size_t i : same) {
        const Tensor& p = flat_params_[i];
        Tensor grad = p.grad();
        const int first = use_momentum && steps_[i] == 0 ? 1 : 0;
        ps[first].push_back(p);
        gs[first].push_back(kernels::contiguous(grad.dtype() == p.dtype() ? grad : kernels::cast(grad, p.dtype())));
        if (use_momentum) bufs[first].push_back(state(kMomentumBuffer, i));
        ++steps_[i];
      }
      for (int first : {0, 1}) {
        if (ps[first].empty()) continue;
        kernels::sgd_step(
            ps[first], gs[first], bufs[first],
            {h[kLr], h[kMomentum], h[kDampening], h[kWeightDecay], h[kNesterov] != 0, h[kMaximize] != 0, first == 1});
      }
    }
  }
}

}  // namespace brisk::optim
