// GradScaler: the loss scale is a host double; the gradients' unscale and inf/NaN check is one
// fused pass per device whose flag is the only value read back from the GPU per step.
#include "brisk/amp/grad_scaler.h"

#include <algorithm>
#include <cmath>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/optim.h"

namespace brisk::amp {

GradScaler::GradScaler(GradScalerOptions o) : o_(o), scale_(o.init_scale) {
  BRISK_CHECK(o.init_scale > 0, "GradScaler: init_scale must be positive, got ", o.init_scale);
  BRISK_CHECK(o.growth_factor > 1, "GradScaler: growth_factor must be > 1, got ", o.growth_factor);
  BRISK_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler: backoff_factor must be in (0, 1), got ",
              o.backoff_factor);
  BRISK_CHECK(o.growth_interval > 0, "GradScaler: growth_interval must be positive, got ", o.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  return o_.enabled ? loss * scale_ : loss;
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!o_.enabled) return;
  BRISK_CHECK(!unscaled_, "GradScaler::unscale_: already called since the last update()");
  // The gradients by device: one fused unscale + check per device (one host read each).
  std::vector<std::vector<Tensor>> by_device;
  for (const Tensor& p : opt.all_params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous()) {
      g = kernels::contiguous(g);
      p.set_grad(g);
    }
    auto it = std::find_if(by_device.begin(), by_device.end(),
                           [&](const std::vector<Tensor>& v) { return v.front().device() == g.device(); });
    if (it == by_device.end()) {
      by_device.push_back({g});
    } else {
      it->push_back(g);
    }
  }
  bool found = false;
  for (const auto& grads : by_device) found |= kernels::unscale_and_check_(grads, 1.0 / scale_);
  found_inf_ = reduce_ ? reduce_(found) : found;
  unscaled_ = true;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!o_.enabled) {
    opt.step();
    return true;
  }
  if (!unscaled_) unscale_(opt);
  if (found_inf_) return false;
  opt.step();
  return true;
}

void GradScaler::update() {
  if (!o_.enabled) return;
  if (found_inf_) {
    scale_ *= o_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == o_.growth_interval) {
    scale_ *= o_.growth_factor;
    growth_tracker_ = 0;
  }
  found_inf_ = false;
  unscaled_ = false;
}

optim::StateDict GradScaler::state_dict() const {
  optim::StateDict sd;
  sd.scalars = {{"scale", scale_},
                {"growth_factor", o_.growth_factor},
                {"backoff_factor", o_.backoff_factor},
                {"growth_interval", static_cast<double>(o_.growth_interval)},
                {"growth_tracker", static_cast<double>(growth_tracker_)}};
  return sd;
}

void GradScaler::load_state_dict(const optim::StateDict& sd) {
  // Everything is checked before anything changes.
  const double scale = sd.scalar("scale"), growth = sd.scalar("growth_factor"), backoff = sd.scalar("backoff_factor");
  BRISK_CHECK(std::isfinite(scale) && scale > 0,
              "GradScaler::load_state_dict: 'scale' must be finite and positive, got ", scale);
  BRISK_CHECK(std::isfinite(growth) && growth > 1, "GradScaler::load_state_dict: 'growth_factor' must be > 1, got ",
              growth);
  BRISK_CHECK(backoff > 0 && backoff < 1, "GradScaler::load_state_dict: 'backoff_factor' must be in (0, 1), got ",
              backoff);
  const int64_t interval = sd.count("growth_interval", 1, optim::StateDict::kMaxCount, "GradScaler");
  const int64_t tracker = sd.count("growth_tracker", 0, interval - 1, "GradScaler");
  scale_ = scale;
  o_.growth_factor = growth;
  o_.backoff_factor = backoff;
  o_.growth_interval = interval;
  growth_tracker_ = tracker;
}

}  // namespace brisk::amp
