// GradScaler: dynamic loss scaling for fp16 training (bf16 needs none). The loss is multiplied by
// the scale before backward; before the optimizer step the gradients are unscaled in one fused
// pass that also detects inf/NaN; a step with inf/NaN is skipped and the scale halves; after
// `growth_interval` clean steps in a row the scale doubles. Constants as PyTorch's.
//
// On a GPU: the scale stays a host double (PyTorch keeps it on the device to avoid reading the
// inf flag; brisk reads it because the skip decision is made on the host). unscale_ is one fused
// pass over all gradients of a device (multiply by 1/scale, set a device flag on inf/NaN) and one
// host synchronisation to read the flag: at most one per optimizer step (per device). step() and
// update() add none; the optimizer's own step never waits for the GPU.
#pragma once
#include <functional>

#include "brisk/optim/optimizer.h"

namespace brisk::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (the loss itself when disabled).
  Tensor scale(const Tensor& loss) const;
  // Divides the optimizer's gradients by the scale and records whether any was inf/NaN (a
  // non-contiguous gradient is replaced by a contiguous copy first). At most once per optimizer
  // step (a second call before update() throws).
  void unscale_(optim::Optimizer& opt);
  // Unscales if not done yet, then steps unless inf/NaN was found. Returns whether it stepped.
  bool step(optim::Optimizer& opt);
  // Adjusts the scale after a step: back off on inf/NaN, grow after growth_interval clean steps.
  void update();

  double get_scale() const { return scale_; }
  bool found_inf() const { return found_inf_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return o_.enabled; }
  // For data parallelism: combines this rank's inf/NaN flag with the others' (an all-reduce of
  // max) so every rank skips the same steps.
  void set_found_inf_reducer(std::function<bool(bool)> reduce) { reduce_ = std::move(reduce); }

  optim::StateDict state_dict() const;
  void load_state_dict(const optim::StateDict& sd);

 private:
  GradScalerOptions o_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool found_inf_ = false;
  bool unscaled_ = false;
  std::function<bool(bool)> reduce_;
};

}  // namespace brisk::amp
