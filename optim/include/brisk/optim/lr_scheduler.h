// Learning-rate schedules. Each computes the rate of step `n` in closed form from the group's
// base rate, so resuming from a state dict gives exactly the uninterrupted schedule.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "brisk/core/enums.h"
#include "brisk/optim/optimizer.h"

namespace brisk::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  // Advances one step and writes the new rate into every group.
  void step();
  int64_t last_step() const { return last_step_; }
  double get_last_lr(size_t group = 0) const;
  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd);
  Optimizer& optimizer() { return opt_; }
  // Step gate (for the Accelerator, as Optimizer's): when it returns false, step() does nothing,
  // so the schedule advances once per optimizer step that really happened.
  void set_step_gate(std::function<bool()> gate) { gate_ = std::move(gate); }

 protected:
  explicit LRScheduler(Optimizer& opt);
  // Call at the end of each derived constructor: applies the rate of step 0.
  void init();
  virtual double lr_at(int64_t step, double base_lr) const = 0;

 private:
  void apply();
  Optimizer& opt_;
  std::vector<double> base_lrs_;
  int64_t last_step_ = 0;
  std::function<bool()> gate_;
};

// base * gamma^(floor(step / step_size))
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t step, double base) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// base * gamma^(number of milestones <= step)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double lr_at(int64_t step, double base) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// base * gamma^step
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma);

 protected:
  double lr_at(int64_t step, double base) const override;

 private:
  double gamma_;
};

// eta_min + (base - eta_min) * (1 + cos(pi * step / t_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min = 0.0);

 protected:
  double lr_at(int64_t step, double base) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// The shape of WarmupLR's decay after the warm-up (spelled "cosine", "linear", "constant").
enum class WarmupDecay : uint8_t { Cosine, Linear, Constant };

struct WarmupOptions {
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;                  // warm-up included
  WarmupDecay decay = WarmupDecay::Cosine;  // Constant: the base rate after the warm-up
  double start_factor = 0.0;                // rate at step 0 = base * start_factor
  double min_factor = 0.0;                  // rate at total_steps = base * min_factor
};
// Linear warm-up to the base rate, then cosine or linear decay to base * min_factor.
class WarmupLR : public LRScheduler {
 public:
  WarmupLR(Optimizer& opt, WarmupOptions options);

 protected:
  double lr_at(int64_t step, double base) const override;

 private:
  WarmupOptions o_;
};

// base * fn(step)
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& opt, std::function<double(int64_t)> fn);

 protected:
  double lr_at(int64_t step, double base) const override;

 private:
  std::function<double(int64_t)> fn_;
};

}  // namespace brisk::optim

namespace brisk {
template <>
struct EnumNames<optim::WarmupDecay> {
  static constexpr std::array<std::pair<std::string_view, optim::WarmupDecay>, 3> values{
      {{"cosine", optim::WarmupDecay::Cosine},
       {"linear", optim::WarmupDecay::Linear},
       {"constant", optim::WarmupDecay::Constant}}};
};
}  // namespace brisk
