// Optimizer base: groups, per-parameter state, gating, and state dicts.
#include "brisk/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <tuple>

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

void Optimizer::check_params(const std::vector<Tensor>& params) const {
  BRISK_CHECK(!params.empty(), name(), ": a parameter group is empty (did the model register its parameters?)");
  for (const Tensor& p : params) {
    BRISK_CHECK(p.defined() && p.is_floating_point(), name(), ": parameters must be floating-point tensors");
    BRISK_CHECK(p.is_leaf(), name(), ": can't optimize a non-leaf tensor of shape ", p.sizes());
    for (const Tensor& q : flat_params_)
      BRISK_CHECK(!q.is_same(p), name(), ": a parameter (shape ", p.sizes(), ") appears in more than one group");
    size_t same = 0;
    for (const Tensor& q : params) same += q.is_same(p);
    BRISK_CHECK(same == 1, name(), ": a parameter (shape ", p.sizes(), ") appears more than once in a group");
  }
}

void Optimizer::add_group(std::vector<Tensor> params, std::vector<double> hyper) {
  check_params(params);
  BRISK_CHECK(hyper.size() == hyper_names_.size(), name(), ": internal error: ", hyper.size(), " hyper-parameters for ",
              hyper_names_.size(), " names");
  BRISK_CHECK(flat_.empty() || std::all_of(flat_.begin(), flat_.end(), [](const auto& f) { return f.empty(); }), name(),
              ": parameter groups must all be added before the first step");
  const size_t first = flat_params_.size();
  for (const Tensor& p : params) {
    flat_params_.push_back(p);
    has_state_.push_back(0);
    steps_.push_back(0);
  }
  groups_.push_back({std::move(params), std::move(hyper), first});
}

void Optimizer::replace_params(std::vector<std::vector<Tensor>> params) {
  BRISK_CHECK(params.size() == groups_.size(), name(), "::replace_params: ", params.size(), " parameter lists for ",
              groups_.size(), " groups");
  bool has_state = false;
  for (const auto& f : flat_) has_state |= !f.empty();
  for (int64_t s : steps_) has_state |= s != 0;
  BRISK_CHECK(!has_state, name(),
              "::replace_params: the optimizer already has state (it stepped or loaded a state dict); "
              "replace its parameters before that");
  std::vector<Tensor> old_flat = std::move(flat_params_);
  flat_params_.clear();
  try {
    for (const auto& list : params) {
      check_params(list);
      for (const Tensor& p : list) flat_params_.push_back(p);
    }
  } catch (...) {
    flat_params_ = std::move(old_flat);
    throw;
  }
  has_state_.assign(flat_params_.size(), 0);
  steps_.assign(flat_params_.size(), 0);
  size_t first = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].params = std::move(params[g]);
    groups_[g].first = first;
    first += groups_[g].params.size();
  }
  buckets_.clear();
  copies_.clear();
  flat_.assign(state_names_.size(), {});
  views_.assign(state_names_.size(), {});
}

void Optimizer::layout() {
  buckets_.clear();
  bucket_.assign(flat_params_.size(), 0);
  offset_.assign(flat_params_.size(), 0);
  for (size_t i = 0; i < flat_params_.size(); ++i) {
    const Tensor& p = flat_params_[i];
    size_t b = 0;
    while (b < buckets_.size() && !(buckets_[b].dtype == p.dtype() && buckets_[b].device == p.device())) ++b;
    if (b == buckets_.size()) buckets_.push_back({p.dtype(), p.device(), 0});
    bucket_[i] = b;
    // Each slot starts on a 16-byte boundary, so the GPU kernels can use 128-bit loads on it.
    const int64_t align = std::max<int64_t>(1, 16 / static_cast<int64_t>(p.element_size()));
    offset_[i] = (buckets_[b].numel + align - 1) / align * align;
    buckets_[b].numel = offset_[i] + p.numel();
  }
  flat_.assign(state_names_.size(), {});
  views_.assign(state_names_.size(), {});
}

void Optimizer::allocate(size_t kind) {
  if (buckets_.empty() && !flat_params_.empty()) layout();
  MemoryCategoryGuard cat(MemoryCategory::OptimizerState);
  auto& flat = flat_[kind];
  for (const Bucket& b : buckets_) {
    Tensor z = empty({b.numel}, b.dtype, b.device);
    kernels::fill_(z, 0.0);
    flat.push_back(z);
  }
  auto& views = views_[kind];
  views.clear();
  for (size_t i = 0; i < flat_params_.size(); ++i) {
    const Tensor& p = flat_params_[i];
    views.push_back(flat[bucket_[i]].narrow(0, offset_[i], p.numel()).view(p.sizes()));
  }
}

void Optimizer::relayout_if_moved() {
  if (buckets_.empty()) return;
  bool moved = false;
  for (size_t i = 0; i < flat_params_.size() && !moved; ++i) {
    const Bucket& b = buckets_[bucket_[i]];
    moved = flat_params_[i].dtype() != b.dtype || flat_params_[i].device() != b.device;
  }
  if (!moved) return;
  std::vector<std::vector<Tensor>> old = std::move(views_);
  std::vector<char> had(flat_.size());
  for (size_t k = 0; k < flat_.size(); ++k) had[k] = !flat_[k].empty();
  layout();
  for (size_t k = 0; k < had.size(); ++k) {
    if (!had[k]) continue;
    allocate(k);
    for (size_t i = 0; i < flat_params_.size(); ++i) kernels::copy_(views_[k][i], old[k][i]);
  }
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

std::vector<std::vector<size_t>> Optimizer::by_dtype_and_device(const std::vector<size_t>& params) const {
  std::vector<std::vector<size_t>> groups;
  for (size_t i : params) {
    const Tensor& t = flat_params_[i];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const std::vector<size_t>& g) {
      return flat_params_[g.front()].dtype() == t.dtype() && flat_params_[g.front()].device() == t.device();
    });
    if (it == groups.end()) {
      groups.push_back({i});
    } else {
      it->push_back(i);
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
  for (size_t h = 0; h < hyper_names_.size(); ++h)
    if (hyper_names_[h] == key) return groups_[group].hyper[h];
  BRISK_CHECK(false, name(), ": no hyper-parameter '", key, "'");
  return 0;
}

// Every optimizer names "lr" first.
double Optimizer::lr(size_t group) const {
  BRISK_CHECK(group < groups_.size(), name(), ": no parameter group ", group, " (have ", groups_.size(), ")");
  return groups_[group].hyper[0];
}

void Optimizer::set_lr(double lr, size_t group) {
  BRISK_CHECK(group < groups_.size(), name(), ": no parameter group ", group);
  BRISK_CHECK(lr >= 0, name(), ": Invalid learning rate: ", lr);
  groups_[group].hyper[0] = lr;
  lr_changed(group);
}

void Optimizer::step() {
  if (gate_ && !gate_()) return;
  // "Adam.step", "SGD.step": the optimizer's name, as PyTorch's profiler shows it.
  profiler::Scope prof_scope(profiler::enabled() ? profiler::intern(std::string(name()) + ".step") : "");
  NoGradGuard no_grad;
  relayout_if_moved();
  if (wrapper_)
    wrapper_([this] { update(); });
  else
    update();
  refresh_autocast_copies();
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
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string pre = "param_groups." + std::to_string(gi) + ".";
    for (size_t h = 0; h < hyper_names_.size(); ++h) sd.scalars[pre + hyper_names_[h]] = groups_[gi].hyper[h];
    sd.scalars[pre + "num_params"] = static_cast<double>(groups_[gi].params.size());
  }
  for (size_t i = 0; i < flat_params_.size(); ++i) {
    const std::string sp = "state." + std::to_string(i) + ".";
    sd.scalars[sp + "step"] = static_cast<double>(steps_[i]);
    // By name, as the per-parameter maps listed them before the state became flat.
    std::vector<size_t> kinds;
    for (size_t k = 0; k < state_names_.size(); ++k)
      if (has_state_[i] & (1u << k)) kinds.push_back(k);
    std::sort(kinds.begin(), kinds.end(), [&](size_t a, size_t b) { return state_names_[a] < state_names_[b]; });
    for (size_t k : kinds) sd.tensors.emplace_back(sp + state_names_[k], views_[k][i]);
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  // Everything is checked before anything changes: a bad state dict leaves the optimizer as it was.
  std::vector<std::vector<double>> hyper(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string pre = "param_groups." + std::to_string(gi) + ".";
    auto np = static_cast<size_t>(sd.count(pre + "num_params", 0, StateDict::kMaxCount, name()));
    BRISK_CHECK(np == groups_[gi].params.size(), name(), "::load_state_dict: group ", gi, " has ",
                groups_[gi].params.size(), " parameters but the state dict has ", np);
    for (const std::string& h : hyper_names_) hyper[gi].push_back(sd.scalar(pre + h));
  }
  std::vector<int64_t> steps(flat_params_.size());
  for (size_t i = 0; i < flat_params_.size(); ++i)
    steps[i] = sd.count("state." + std::to_string(i) + ".step", 0, StateDict::kMaxCount, name());
  const int64_t taken = sd.count("steps_taken", 0, StateDict::kMaxCount, name());
  // state.<i>.<kind>: i a parameter, kind one of this optimizer's, the parameter's shape.
  std::vector<std::tuple<size_t, size_t, const Tensor*>> loads;
  for (const auto& [key, t] : sd.tensors) {
    size_t i = 0, k = state_names_.size();
    const size_t dot = key.find('.', 6);
    if (key.rfind("state.", 0) == 0 && dot != std::string::npos && dot > 6 && dot - 6 <= 12 &&
        std::all_of(key.begin() + 6, key.begin() + static_cast<std::ptrdiff_t>(dot),
                    [](char c) { return c >= '0' && c <= '9'; })) {
      i = static_cast<size_t>(std::stoull(key.substr(6, dot - 6)));
      for (k = 0; k < state_names_.size() && state_names_[k] != key.substr(dot + 1); ++k) {
      }
    }
    BRISK_CHECK(
        k < state_names_.size() && i < flat_params_.size(), name(), "::load_state_dict: unexpected tensor '", key,
        "' (expected state.<parameter index below ", flat_params_.size(), ">.<kind>, kinds: ",
        [&] {
          std::string all;
          for (const std::string& n : state_names_) all += (all.empty() ? "" : ", ") + n;
          return all;
        }(),
        ")");
    BRISK_CHECK(t.sizes() == flat_params_[i].sizes(), name(), "::load_state_dict: ", key, " has shape ", t.sizes(),
                " but parameter ", i, " has shape ", flat_params_[i].sizes());
    loads.emplace_back(i, k, &t);
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].hyper = hyper[gi];
  steps_ = steps;
  steps_taken_ = taken;
  relayout_if_moved();
  // The state dict may hold views of this optimizer's own buffers (load_state_dict(state_dict())):
  // those are copied out before the buffers are cleared.
  std::vector<Tensor> sources;
  for (const auto& [i, k, t] : loads) {
    bool own = false;
    for (const auto& kind : flat_)
      for (const Tensor& f : kind) own |= f.storage() == t->storage();
    sources.push_back(own ? t->clone() : *t);
  }
  for (size_t k = 0; k < flat_.size(); ++k)
    for (const Tensor& f : flat_[k]) kernels::fill_(f, 0.0);
  std::fill(has_state_.begin(), has_state_.end(), 0);
  for (size_t n = 0; n < loads.size(); ++n)
    kernels::copy_(state(std::get<1>(loads[n]), std::get<0>(loads[n])), sources[n]);
}

}  // namespace brisk::optim
