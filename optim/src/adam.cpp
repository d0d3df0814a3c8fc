// Adam / AdamW: validation and the fused update.
#include "brisk/optim/adam.h"

#include "brisk/autograd/autocast.h"
#include "brisk/kernels/cuda.h"
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
  set_capturable(o.capturable);
}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) : Adam(false) {
  for (auto& g : groups) {
    check_params(g.params);
    add_group(std::move(g.params), validate(g.options));
    set_capturable(g.options.capturable);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o) : Adam(true) {
  check_params(params);
  add_group(std::move(params), validate(o));
  set_capturable(o.capturable);
}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups) : Adam(true) {
  for (auto& g : groups) {
    check_params(g.params);
    add_group(std::move(g.params), validate(g.options));
    set_capturable(g.options.capturable);
  }
}

// One fused update of parameters given by global index (one dtype and device), with their
// gradients cast to the parameters' dtype and their state; with autocast copies on (f32
// parameters), the same pass writes each parameter's 16-bit copy, registered for autocast after.
void Adam::step_part(const std::vector<size_t>& part, const kernels::AdamHyper& hyper) {
  std::vector<Tensor> ps, gs, m, v, vmax, copies;
  for (size_t i : part) {
    const Tensor& p = flat_params_[i];
    Tensor grad = p.grad();
    ps.push_back(p);
    gs.push_back(kernels::contiguous(grad.dtype() == p.dtype() ? grad : kernels::cast(grad, p.dtype())));
    m.push_back(state(kExpAvg, i));
    v.push_back(state(kExpAvgSq, i));
    if (hyper.amsgrad) vmax.push_back(state(kMaxExpAvgSq, i));
    if (Tensor c = autocast_copy(i); c.defined()) copies.push_back(c);
  }
  kernels::adam_step(ps, gs, m, v, vmax, hyper, copies);
  for (size_t k = 0; k < copies.size(); ++k) autograd::set_autocast_copy(ps[k], copies[k]);
}

void Adam::set_capturable(bool capturable) {
  BRISK_CHECK(!capturable_set_ || capturable == capturable_, name(),
              ": capturable must be the same for every parameter group (the step count is one per optimizer)");
  capturable_ = capturable;
  capturable_set_ = true;
}

void Adam::write_scalars(int64_t step) {
  std::vector<double> v;
  if (step >= 0) v.push_back(static_cast<double>(step));
  for (const Group& g : groups_) v.push_back(g.hyper[kLr]);
  const Tensor host = from_vector(v, {static_cast<int64_t>(v.size())});
  const int64_t first = step >= 0 ? 0 : 1;
  kernels::copy_(scalars_.narrow(0, first, static_cast<int64_t>(v.size())), host);
}

void Adam::lr_changed(size_t) {
  if (!scalars_.defined()) return;
  BRISK_CHECK(!cuda::is_capturing(), name(),
              ": the learning rate changed while a CUDA graph is captured; the captured step reads it from the GPU, "
              "so change it (step the scheduler) outside the captured function, before each replay");
  write_scalars(-1);
}

// One step count for all parameters, on their GPU (scalars_[0]), counted there by the update itself;
// learning rates beside it, written from the host whenever they change outside a capture.
void Adam::update_capturable() {
  const Device dev = flat_params_.front().device();
  for (size_t i = 0; i < flat_params_.size(); ++i) {
    BRISK_CHECK(flat_params_[i].device() == dev, name(), " (capturable): parameter ", i, " is on ",
                flat_params_[i].device().str(), " but parameter 0 on ", dev.str(),
                "; a capturable optimizer needs every parameter on one GPU");
    BRISK_CHECK(flat_params_[i].grad().defined(), name(), " (capturable): parameter ", i,
                " has no gradient; a capturable optimizer keeps one step count on the GPU for all parameters, so "
                "every parameter needs a gradient at every step");
  }
  // Made by the first step; later set_lr and load_state_dict keep its learning rates current.
  if (!scalars_.defined()) {
    BRISK_CHECK(!cuda::is_capturing(), name(),
                " (capturable): the first step must run before a CUDA graph is captured (it moves the step count "
                "and the learning rates to the GPU)");
    for (int64_t s : steps_)
      BRISK_CHECK(s == steps_.front(), name(), " (capturable): the parameters have taken different numbers of steps (",
                  steps_.front(), " and ", s, "); a capturable optimizer keeps one step count");
    scalars_ = empty({1 + static_cast<int64_t>(groups_.size())}, DType::F64, dev);
    write_scalars(steps_.front());
  }
  for (int64_t& s : steps_) ++s;  // the host's count; the GPU's is the one used (state_dict reads it)
  kernels::count_step_(scalars_);
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    const std::vector<double>& h = g.hyper;
    const bool amsgrad = h[kAmsgrad] != 0;
    std::vector<size_t> all(g.params.size());
    for (size_t j = 0; j < all.size(); ++j) all[j] = g.first + j;
    for (const std::vector<size_t>& part : by_dtype_and_device(all))
      step_part(part, {h[kLr], h[kBeta1], h[kBeta2], h[kEps], h[kWeightDecay], decoupled_, amsgrad, h[kMaximize] != 0,
                       steps_[part.front()], scalars_, 1 + static_cast<int64_t>(gi)});
  }
}

StateDict Adam::state_dict() const {
  StateDict sd = Optimizer::state_dict();
  if (!scalars_.defined()) return sd;
  const double step = scalars_.narrow(0, 0, 1).item<double>();
  for (size_t i = 0; i < flat_params_.size(); ++i) sd.scalars["state." + std::to_string(i) + ".step"] = step;
  return sd;
}

void Adam::load_state_dict(const StateDict& sd) {
  Optimizer::load_state_dict(sd);
  if (!scalars_.defined()) return;
  // The tensor stays (a captured graph reads it); its values become the loaded ones.
  for (int64_t s : steps_)
    BRISK_CHECK(s == steps_.front(), name(), "::load_state_dict (capturable): the state dict gives the parameters ",
                "different step counts (", steps_.front(), " and ", s, "); a capturable optimizer keeps one");
  write_scalars(steps_.front());
}

void Adam::update() {
  if (capturable_ && !flat_params_.empty() && flat_params_.front().device().is_cuda()) {
    update_capturable();
    return;
  }
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
      for (const std::vector<size_t>& part : by_dtype_and_device(at_step))
        step_part(part, {h[kLr], h[kBeta1], h[kBeta2], h[kEps], h[kWeightDecay], decoupled_, amsgrad, h[kMaximize] != 0,
                         step});
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
