// Adam / AdamW: validation and the fused update.
#include "brisk/optim/adam.h"

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/optim.h"

namespace brisk::optim {

namespace {

double beta(const std::pair<double, double>& betas, const std::optional<double>& old, int index, const char* who) {
  const double b = index == 0 ? betas.first : betas.second;
  const double dflt = index == 0 ? 0.9 : 0.999;
  if (!old) return b;
  BRISK_CHECK(b == dflt || b == *old, who, ": beta", index + 1, " = ", *old, " contradicts betas.",
              index == 0 ? "first" : "second", " = ", b, " (set one of them)");
  return *old;
}

}  // namespace

Adam::Adam(bool decoupled)
    : Optimizer({"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize"},
                {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}),
      decoupled_(decoupled) {}

template <class Options>
std::vector<double> Adam::validate(const Options& o) const {
  const double beta1 = beta(o.betas, o.beta1, 0, name()), beta2 = beta(o.betas, o.beta2, 1, name());
  BRISK_CHECK(o.lr >= 0, name(), ": Invalid learning rate: ", o.lr);
  BRISK_CHECK(o.eps >= 0, name(), ": Invalid epsilon value: ", o.eps);
  BRISK_CHECK(beta1 >= 0 && beta1 < 1, name(), ": Invalid beta parameter at index 0: ", beta1);
  BRISK_CHECK(beta2 >= 0 && beta2 < 1, name(), ": Invalid beta parameter at index 1: ", beta2);
  BRISK_CHECK(o.weight_decay >= 0, name(), ": Invalid weight_decay value: ", o.weight_decay);
  std::vector<double> h(7);
  h[kLr] = o.lr;
  h[kBeta1] = beta1;
  h[kBeta2] = beta2;
  h[kEps] = o.eps;
  h[kWeightDecay] = o.weight_decay;
  h[kAmsgrad] = o.amsgrad ? 1.0 : 0.0;
  h[kMaximize] = o.maximize ? 1.0 : 0.0;
  return h;
}

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Adam(false) {
  check_params(params);
  add_group(std::move(params), validate(o));
}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) : Adam(false) {
  for (auto& g : groups) {
    check_params(g.params);
    add_group(std::move(g.params), validate(g.options));
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o) : Adam(true) {
  check_params(params);
  add_group(std::move(params), validate(o));
}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups) : Adam(true) {
  for (auto& g : groups) {
    check_params(g.params);
    add_group(std::move(g.params), validate(g.options));
  }
}

void Adam::update() {
  std::vector<Tensor> ps, gs, m, v, vmax;
  for (const Group& g : groups_) {
    const std::vector<double>& h = g.hyper;
    const bool amsgrad = h[kAmsgrad] != 0;
    // Parameters at the same step count share one fused call per dtype and device (step counts
    // differ only after a parameter missed a step for lack of a gradient); the state are views
    // of the flat buffers.
    std::map<int64_t, std::vector<size_t>> by_step;
    for (size_t j = 0; j < g.params.size(); ++j)
      if (g.params[j].grad().defined()) by_step[++steps_[g.first + j]].push_back(g.first + j);
    for (auto& [step, at_step] : by_step) {
      for (const std::vector<size_t>& part : by_dtype_and_device(at_step)) {
        ps.clear(), gs.clear(), m.clear(), v.clear(), vmax.clear();
        for (size_t i : part) {
          const Tensor& p = flat_params_[i];
          Tensor grad = p.grad();
          ps.push_back(p);
          gs.push_back(kernels::contiguous(grad.dtype() == p.dtype() ? grad : kernels::cast(grad, p.dtype())));
          m.push_back(state(kExpAvg, i));
          v.push_back(state(kExpAvgSq, i));
          if (amsgrad) vmax.push_back(state(kMaxExpAvgSq, i));
        }
        kernels::adam_step(
            ps, gs, m, v, vmax,
            {h[kLr], h[kBeta1], h[kBeta2], h[kEps], h[kWeightDecay], decoupled_, amsgrad, h[kMaximize] != 0, step});
      }
    }
  }
}

std::vector<ParamGroup<AdamWOptions>> decay_matrices_only(const std::vector<Tensor>& params, AdamWOptions options) {
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  std::vector<ParamGroup<AdamWOptions>> groups;
  if (!decay.empty()) groups.push_back({decay, options});
  options.weight_decay = 0.0;
  if (!no_decay.empty()) groups.push_back({no_decay, options});
  return groups;
}

}  // namespace brisk::optim
