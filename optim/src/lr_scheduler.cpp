// LR schedules in closed form.
#include "brisk/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace brisk::optim {

LRScheduler::LRScheduler(Optimizer& opt) : opt_(opt) {
  for (size_t g = 0; g < opt.num_groups(); ++g) base_lrs_.push_back(opt.lr(g));
}

void LRScheduler::init() {
  apply();
}

void LRScheduler::apply() {
  for (size_t g = 0; g < base_lrs_.size(); ++g) opt_.set_lr(lr_at(last_step_, base_lrs_[g]), g);
}

void LRScheduler::step() {
  if (gate_ && !gate_()) return;
  ++last_step_;
  apply();
}

double LRScheduler::get_last_lr(size_t group) const {
  return opt_.lr(group);
}

StateDict LRScheduler::state_dict() const {
  StateDict sd;
  sd.scalars["last_step"] = static_cast<double>(last_step_);
  for (size_t g = 0; g < base_lrs_.size(); ++g) sd.scalars["base_lrs." + std::to_string(g)] = base_lrs_[g];
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) {
  last_step_ = sd.count("last_step", 0, StateDict::kMaxCount, "LRScheduler");
  for (size_t g = 0; g < base_lrs_.size(); ++g) base_lrs_[g] = sd.scalar("base_lrs." + std::to_string(g));
  apply();
}

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt), step_size_(step_size), gamma_(gamma) {
  BRISK_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  init();
}
double StepLR::lr_at(int64_t step, double base) const {
  const int64_t periods = step / step_size_;  // whole periods, as PyTorch
  return base * std::pow(gamma_, static_cast<double>(periods));
}

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(opt), milestones_(std::move(milestones)), gamma_(gamma) {
  BRISK_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
              "MultiStepLR: milestones must be increasing, got ", milestones_);
  init();
}
double MultiStepLR::lr_at(int64_t step, double base) const {
  auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
  return base * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma) : LRScheduler(opt), gamma_(gamma) {
  BRISK_CHECK(gamma > 0, "ExponentialLR: gamma must be positive, got ", gamma);
  init();
}
double ExponentialLR::lr_at(int64_t step, double base) const {
  return base * std::pow(gamma_, static_cast<double>(step));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min)
    : LRScheduler(opt), t_max_(t_max), eta_min_(eta_min) {
  BRISK_CHECK(t_max > 0, "CosineAnnealingLR: T_max must be positive, got ", t_max);
  init();
}
double CosineAnnealingLR::lr_at(int64_t step, double base) const {
  return eta_min_ + (base - eta_min_) *
                        (1 + std::cos(std::numbers::pi * static_cast<double>(step) / static_cast<double>(t_max_))) / 2;
}

WarmupLR::WarmupLR(Optimizer& opt, WarmupOptions o) : LRScheduler(opt), o_(o) {
  BRISK_CHECK(o_.warmup_steps >= 0, "WarmupLR: warmup_steps must be >= 0, got ", o_.warmup_steps);
  BRISK_CHECK(o_.decay == WarmupDecay::Constant || o_.total_steps > o_.warmup_steps, "WarmupLR: total_steps (",
              o_.total_steps, ") must exceed warmup_steps (", o_.warmup_steps, ")");
  init();
}
double WarmupLR::lr_at(int64_t step, double base) const {
  if (step < o_.warmup_steps) {
    double f = static_cast<double>(step) / static_cast<double>(o_.warmup_steps);
    return base * (o_.start_factor + (1 - o_.start_factor) * f);
  }
  if (o_.decay == WarmupDecay::Constant) return base;
  double t = std::min(
      1.0, static_cast<double>(step - o_.warmup_steps) / static_cast<double>(o_.total_steps - o_.warmup_steps));
  double shape = o_.decay == WarmupDecay::Cosine ? (1 + std::cos(std::numbers::pi * t)) / 2 : 1 - t;
  return base * (o_.min_factor + (1 - o_.min_factor) * shape);
}

LambdaLR::LambdaLR(Optimizer& opt, std::function<double(int64_t)> fn) : LRScheduler(opt), fn_(std::move(fn)) {
  BRISK_CHECK(static_cast<bool>(fn_), "LambdaLR: the lambda is empty");
  init();
}
double LambdaLR::lr_at(int64_t step, double base) const {
  return base * fn_(step);
}

}  // namespace brisk::optim
