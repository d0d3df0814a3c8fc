// The training step: accumulate / no_sync windows, autocast, backward (loss scaling, the
// Reducer or ZeRO hooks), the gates that make a prepared optimizer's step() a no-op on micro-steps
// that do not sync, the inf/NaN check, unscaling and gradient clipping.
#include "brisk/accelerate/accelerator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "accelerator_impl.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/accelerate/host.h"
#include "brisk/autograd/autograd.h"
#include "brisk/core/profiler.h"
#include "brisk/core/rng.h"
#include "brisk/data/sampler.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/index.h"
#include "brisk/kernels/optim.h"
#include "brisk/kernels/settings.h"
#include "brisk/optim/clip.h"
#include "brisk/util/env.h"
#include "brisk/util/trace.h"

namespace brisk {

// --- the training step ---------------------------------------------------------------------------

// Which prepared loader the current batch came from: the one whose (epoch, position) moved
// since the last look, preferring the one that started its epoch last.
Accelerator::LoaderState* Accelerator::active_loader() {
  LoaderState* best = nullptr;
  for (auto& l : loaders_) {
    const uint64_t e = l->loader->epoch();
    const int64_t p = l->loader->position();
    const bool changed = !l->seen_valid || e != l->seen_epoch || p != l->seen_position || l->begin_tick != l->seen_tick;
    l->seen_valid = true;
    l->seen_epoch = e;
    l->seen_position = p;
    l->seen_tick = l->begin_tick;
    if (changed && l->begin_tick > 0 && (!best || l->begin_tick > best->begin_tick)) best = l.get();
  }
  if (best) active_ = best;
  return active_;
}

Accelerator::Accumulate::Accumulate(Accelerator& acc, nn::Module* model) {
  if (model) {
    bool known = false;
    for (auto& m : acc.models_) known |= m->model == model;
    BRISK_CHECK(known, "Accelerator::accumulate: the model was not prepared (call acc.prepare(model, ...) first)");
  }
  // As Accelerate's _do_sync: the last batch of the data loader always syncs (and restarts
  // the count); otherwise every gradient_accumulation_steps-th micro-step does.
  LoaderState* l = acc.active_loader();
  if (l && l->at_end()) {
    acc.step_ = 0;
    sync_ = true;
  } else {
    ++acc.step_;
    sync_ = acc.step_ % acc.s_.gradient_accumulation_steps == 0;
  }
  acc.sh_->sync_gradients = sync_;
}

Accelerator::NoSync::NoSync(Accelerator& acc, nn::Module& model) : acc_(acc), model_(&model) {
  for (auto& m : acc_.models_)
    if (m->model == model_) ++m->no_sync_depth;
}

Accelerator::NoSync::~NoSync() {
  for (auto& m : acc_.models_)
    if (m->model == model_) --m->no_sync_depth;
}

Accelerator::Autocast::Autocast(MixedPrecision mixed_precision) {
  bool enabled = false;
  DType dtype = amp::mixed_precision_dtype(mixed_precision, &enabled);
  if (enabled) guard_.emplace(dtype, true);
}

void Accelerator::backward(const Tensor& loss) {
  auto span = trace_span("backward", "compute");
  inject_fault();
  inject_preemption();
  BRISK_CHECK(loss.defined(), "Accelerator::backward: the loss is undefined");
  Tensor l = loss;
  if (s_.gradient_accumulation_steps > 1) l = l / static_cast<double>(s_.gradient_accumulation_steps);
  if (scaler_) l = scaler_->scale(l);
  bool any_sync = false;
  for (auto& m : models_)
    if (m->reducer) {
      const bool sync = sh_->sync_gradients && m->no_sync_depth == 0;
      m->reducer->set_sync(sync);
      any_sync |= sync;
    }
  if (s_.sharding != Sharding::None) check_sharded_params();
  bool zero_sync = sh_->sync_gradients;
  for (auto& m : models_) zero_sync &= m->no_sync_depth == 0;
  for (auto& o : optimizers_)
    if (o->zero) o->zero->begin_backward(zero_sync);
  l.backward();
  for (auto& o : optimizers_)
    if (o->zero) o->zero->end_backward();
  if (any_sync) {
    auto wait = trace_span("wait for gradients", "comm");
    for (auto& m : models_)
      if (m->reducer && m->reducer->sync()) m->reducer->finalize();
  }
  if (s_.nan_watch) check_finite(loss);
  if (sh_->sync_gradients) on_synced_backward();
}

// Under sharding no Reducer averages the models' gradients: the optimizers' engines do, so every
// parameter that trains must belong to a prepared optimizer (else its gradient would stay local and
// the ranks would drift apart). Checked once per prepared model.
void Accelerator::check_sharded_params() {
  for (size_t i = 0; i < models_.size(); ++i) {
    ModelState& m = *models_[i];
    if (m.sharding_checked) continue;
    for (const auto& [name, p] : m.model->named_parameters()) {
      if (!p.requires_grad()) continue;
      bool owned = false;
      for (auto& o : optimizers_) owned = owned || (o->zero && o->zero->owns(p));
      BRISK_CHECK(owned, "Accelerator::backward: with sharding ", enum_name(s_.sharding), " the parameter '", name, "'",
                  models_.size() > 1 ? " of model " + std::to_string(i) : std::string(),
                  " belongs to no prepared optimizer, so nothing would average its gradient across processes; "
                  "prepare an optimizer over it, or set requires_grad(false) (docs/sharding.md)");
    }
    m.sharding_checked = true;
  }
}

// nan_watch: one reduction over the loss and every gradient (max |x|, NaN winning) per device, read
// once; only when it is not finite are the tensors looked at one by one to name the culprit. Under
// fp16 the gradients are still scaled here and an overflow is the GradScaler's business (it skips
// the step), so only the loss is checked there. After the reducers finished, every rank holds the
// same gradients and so stops at the same step.
void Accelerator::check_finite(const Tensor& loss) {
  auto span = trace_span("nan_watch", "compute");
  ++backward_calls_;
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  auto add = [&](const Tensor& t) {
    for (auto& [d, list] : by_device)
      if (d == t.device()) return list.push_back(t);
    by_device.push_back({t.device(), {t}});
  };
  const Tensor l = loss.detach();
  if (is_floating(l.dtype())) add(l);
  if (!scaler_)
    for (auto& m : models_)
      for (const Tensor& p : m->model->parameters())
        if (Tensor g = p.grad(); g.defined() && is_floating(g.dtype())) add(g);
  bool finite = true;
  for (const auto& [device, tensors] : by_device) finite &= std::isfinite(kernels::max_abs(tensors));
  if (finite) return;
  const std::string when = " (nan_watch, backward call " + std::to_string(backward_calls_) + ")";
  const double lv = is_floating(l.dtype()) ? kernels::max_abs({l}) : 0.0;
  BRISK_CHECK(std::isfinite(lv), "Accelerator::backward: the loss is ", std::isnan(lv) ? "NaN" : "inf", when);
  for (size_t i = 0; i < models_.size(); ++i)
    for (const auto& [name, p] : models_[i]->model->named_parameters()) {
      const Tensor g = p.grad();
      if (!g.defined() || !is_floating(g.dtype())) continue;
      const double v = kernels::max_abs({g});
      BRISK_CHECK(std::isfinite(v), "Accelerator::backward: the gradient of parameter '", name, "'",
                  models_.size() > 1 ? " of model " + std::to_string(i) : std::string(), " contains ",
                  std::isnan(v) ? "NaN" : "inf", " (shape ", p.sizes(), ")", when);
    }
}

// After the backward of a micro-step that syncs: under fp16 the gradients are unscaled now (one
// fused pass that also finds inf/NaN, agreed across ranks) and the scale is updated; the next
// optimizer step is skipped when inf/NaN was found.
void Accelerator::on_synced_backward() {
  ++optimizer_steps_;
  sh_->step_skipped = false;
  unscaled_ = false;
  if (scaler_ && !optimizers_.empty()) {
    scaler_->unscale_(*optimizers_.front()->opt);
    sh_->step_skipped = scaler_->found_inf();
    scaler_->update();
    unscaled_ = true;
  }
  for (auto& o : optimizers_) o->pending = true;
}

void Accelerator::unscale_gradients() {
  // backward() already unscaled the synced gradients; on a micro-step that does not sync there
  // is nothing to step, so nothing to unscale either.
  if (!scaler_ || unscaled_ || !sh_->sync_gradients || optimizers_.empty()) return;
  scaler_->unscale_(*optimizers_.front()->opt);
  sh_->step_skipped = scaler_->found_inf();
  scaler_->update();
  unscaled_ = true;
}

double Accelerator::clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  unscale_gradients();
  // Sharded: each rank holds a slice of the averaged gradients (in its optimizers' shards), so the
  // norm is combined across ranks; the slices of every optimizer holding one of `params` are clipped.
  std::vector<Tensor> shard_grads;
  for (auto& o : optimizers_) {
    if (!o->zero) continue;
    bool mine = false;
    for (const Tensor& p : params) mine = mine || o->zero->owns(p);
    if (!mine) continue;
    for (const Tensor& g : o->zero->shard_grads()) shard_grads.push_back(g);
  }
  if (s_.sharding != Sharding::None) {
    BRISK_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
    BRISK_CHECK(norm_type == 2.0 || (std::isinf(norm_type) && norm_type > 0),
                "clip_grad_norm_: norm_type must be 2 or inf, got ", norm_type);
    const bool inf = std::isinf(norm_type);
    const double local = shard_grads.empty() ? 0.0 : kernels::total_norm(shard_grads, norm_type).item<double>();
    Tensor t = full({1}, inf ? local : local * local, {.dtype = DType::F64});
    if (world_size_ > 1) pg_->all_reduce(t, {.op = inf ? dist::ReduceOp::Max : dist::ReduceOp::Sum});
    const double total = inf ? t.item<double>() : std::sqrt(t.item<double>());
    if (!shard_grads.empty())
      kernels::clip_grads_with_norm_(shard_grads, max_norm,
                                     full({}, total, {.dtype = DType::F64, .device = shard_grads.front().device()}));
    return total;
  }
  // The gradients are identical on every rank after a synced backward, so the local norm is the
  // norm over all ranks' gradients.
  return optim::clip_grad_norm_(params, max_norm, norm_type);
}

double Accelerator::clip_grad_norm_(const nn::Module& model, double max_norm, double norm_type) {
  return clip_grad_norm_(model.parameters(), max_norm, norm_type);
}

Tensor Accelerator::clip_grad_norm_tensor_(const nn::Module& model, double max_norm, double norm_type) {
  if (s_.sharding != Sharding::None)  // the norm is combined across ranks on the host
    return full({}, clip_grad_norm_(model, max_norm, norm_type), {.dtype = DType::F64});
  unscale_gradients();
  return optim::clip_grad_norm_tensor_(model.parameters(), max_norm, norm_type);
}

void Accelerator::clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  unscale_gradients();
  optim::clip_grad_value_(params, clip_value);
}

void Accelerator::clip_grad_value_(const nn::Module& model, double clip_value) {
  clip_grad_value_(model.parameters(), clip_value);
}

}  // namespace brisk
