// Optimizer base: groups, per-parameter state, gating, and state dicts.
#include "brisk/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "brisk/autograd/grad_mode.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"

namespace brisk::optim {

const Tensor* StateDict::tensor(const std::string& key) const {
  for (const auto& [k, t] : tensors)
    if (k == key) return &t;
  return nullptr;
}

double StateDict::scalar(const std::string& key) const {
  auto it = scalars.find(key);
  BRISK_CHECK(it != scalars.end(), "optimizer state dict: missing entry '", key, "'");
  return it->second;
}

int64_t StateDict::count(const std::string& key, int64_t lo, int64_t hi, const char* who) const {
  const double v = scalar(key);
  BRISK_CHECK(std::isfinite(v) && v == std::floor(v) && v >= static_cast<double>(lo) && v <= static_cast<double>(hi),
              who, "::load_state_dict: '", key, "' must be an integer from ", lo, " to ", hi, ", got ", v);
  return static_cast<int64_t>(v);
}

void Optimizer::add_group(std::vector<Tensor> params, std::map<std::string, double> hyper) {
  BRISK_CHECK(!params.empty(), name(), ": a parameter group is empty (did the model register its parameters?)");
  for (const Tensor& p : params) {
    BRISK_CHECK(p.defined() && p.is_floating_point(), name(), ": parameters must be floating-point tensors");
    BRISK_CHECK(p.is_leaf(), name(), ": can't optimize a non-leaf tensor of shape ", p.sizes());
    for (const Group& g : groups_)
      for (const Tensor& q : g.params)
        BRISK_CHECK(!q.is_same(p), name(), ": a parameter (shape ", p.sizes(), ") appears in more than one group");
    size_t same = 0;
    for (const Tensor& q : params) same += q.is_same(p);
    BRISK_CHECK(same == 1, name(), ": a parameter (shape ", p.sizes(), ") appears more than once in a group");
    index_.emplace(p.impl(), state_.size());
    state_.emplace_back();
    steps_.push_back(0);
  }
  groups_.push_back({std::move(params), std::move(hyper)});
}

size_t Optimizer::index_of(const Tensor& param) const {
  auto it = index_.find(param.impl());
  BRISK_CHECK(it != index_.end(), name(), ": tensor of shape ", param.sizes(),
              " is not one of this optimizer's parameters");
  return it->second;
}

Tensor& Optimizer::state(const Tensor& param, const std::string& key, bool* created) {
  auto& slot = state_[index_of(param)];
  auto it = slot.find(key);
  if (created) *created = it == slot.end();
  if (it == slot.end()) {
    MemoryCategoryGuard cat(MemoryCategory::OptimizerState);
    Tensor z = empty(param.sizes(), param.dtype(), param.device());
    kernels::fill_(z, 0.0);
    it = slot.emplace(key, z).first;
  }
  return it->second;
}

int64_t& Optimizer::param_step(const Tensor& param) {
  return steps_[index_of(param)];
}

std::vector<std::vector<Tensor>> Optimizer::by_dtype_and_device(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<Tensor>> groups;
  for (const Tensor& t : tensors) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const std::vector<Tensor>& g) {
      return g.front().dtype() == t.dtype() && g.front().device() == t.device();
    });
    if (it == groups.end()) {
      groups.push_back({t});
    } else {
      it->push_back(t);
    }
  }
  return groups;
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  BRISK_CHECK(group < groups_.size(), name(), ": no parameter group ", group, " (have ", groups_.size(), ")");
  return groups_[group].params;
}

std::vector<Tensor> Optimizer::all_params() const {
  std::vector<Tensor> out;
  for (const Group& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

double Optimizer::hyper(const std::string& key, size_t group) const {
  BRISK_CHECK(group < groups_.size(), name(), ": no parameter group ", group, " (have ", groups_.size(), ")");
  auto it = groups_[group].hyper.find(key);
  BRISK_CHECK(it != groups_[group].hyper.end(), name(), ": no hyper-parameter '", key, "'");
  return it->second;
}

double Optimizer::lr(size_t group) const {
  return hyper("lr", group);
}

void Optimizer::set_lr(double lr, size_t group) {
  BRISK_CHECK(group < groups_.size(), name(), ": no parameter group ", group);
  BRISK_CHECK(lr >= 0, name(), ": Invalid learning rate: ", lr);
  groups_[group].hyper["lr"] = lr;
}

void Optimizer::step() {
  if (gate_ && !gate_()) return;
  // "Adam.step", "SGD.step": the optimizer's name, as PyTorch's profiler shows it.
  profiler::Scope prof_scope(profiler::enabled() ? profiler::intern(std::string(name()) + ".step") : "");
  NoGradGuard no_grad;
  if (wrapper_)
    wrapper_([this] { update(); });
  else
    update();
  ++steps_taken_;
  profiler::step();
}

void Optimizer::zero_grad(bool set_to_none) {
  if (gate_ && !gate_()) return;
  profiler::Scope prof_scope(profiler::enabled() ? profiler::intern(std::string(name()) + ".zero_grad") : "");
  for (const Group& g : groups_)
    for (const Tensor& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none)
        p.set_grad(Tensor());
      else
        kernels::fill_(grad, 0.0);
    }
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  sd.scalars["steps_taken"] = static_cast<double>(steps_taken_);
  size_t i = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (const auto& [k, v] : groups_[gi].hyper) sd.scalars["param_groups." + std::to_string(gi) + "." + k] = v;
    sd.scalars["param_groups." + std::to_string(gi) + ".num_params"] = static_cast<double>(groups_[gi].params.size());
    for (size_t j = 0; j < groups_[gi].params.size(); ++j, ++i) {
      sd.scalars["state." + std::to_string(i) + ".step"] = static_cast<double>(steps_[i]);
      for (const auto& [k, t] : state_[i]) sd.tensors.emplace_back("state." + std::to_string(i) + "." + k, t);
    }
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  size_t i = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string pre = "param_groups." + std::to_string(gi) + ".";
    auto np = static_cast<size_t>(sd.count(pre + "num_params", 0, StateDict::kMaxCount, name()));
    BRISK_CHECK(np == groups_[gi].params.size(), name(), "::load_state_dict: group ", gi, " has ",
                groups_[gi].params.size(), " parameters but the state dict has ", np);
    for (auto& [k, v] : groups_[gi].hyper) v = sd.scalar(pre + k);
    for (size_t j = 0; j < groups_[gi].params.size(); ++j, ++i) {
      const Tensor& p = groups_[gi].params[j];
      steps_[i] = sd.count("state." + std::to_string(i) + ".step", 0, StateDict::kMaxCount, name());
      state_[i].clear();
      const std::string sp = "state." + std::to_string(i) + ".";
      for (const auto& [k, t] : sd.tensors) {
        if (k.rfind(sp, 0) != 0) continue;
        BRISK_CHECK(t.sizes() == p.sizes(), name(), "::load_state_dict: ", k, " has shape ", t.sizes(),
                    " but parameter ", i, " has shape ", p.sizes());
        MemoryCategoryGuard cat(MemoryCategory::OptimizerState);
        Tensor copy = empty(p.sizes(), p.dtype(), p.device());
        kernels::copy_(copy, t);
        state_[i][k.substr(sp.size())] = copy;
      }
    }
  }
  BRISK_CHECK(i == steps_.size(), name(), "::load_state_dict: parameter count mismatch");
  steps_taken_ = sd.count("steps_taken", 0, StateDict::kMaxCount, name());
}

}  // namespace brisk::optim
