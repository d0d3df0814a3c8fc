// Optimizer: parameter groups with their own hyper-parameters, per-parameter state, a fused
// step, zero_grad, and state dicts. Optimizers call kernels directly: no graph is recorded.
// Parameters may live on the CPU or a GPU (state is made on each parameter's device, in its
// dtype); a step is a few fused multi-tensor launches per (dtype, device) and never waits for
// the GPU.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::optim {

// Flat, serialisable optimizer/scheduler state: tensors by key ("state.<param index>.<name>")
// and scalars by key ("param_groups.<g>.lr", "state.<i>.step", ...).
struct StateDict {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, double> scalars;
  const Tensor* tensor(const std::string& key) const;
  double scalar(const std::string& key) const;  // throws naming the key if absent
  // A count stored as a scalar: an integer in [lo, hi], else brisk::Error "<who>::load_state_dict:
  // '<key>' must be an integer from lo to hi, got v". Casting anything else (-1 to size_t, 1e300
  // or NaN to int64) would be undefined behaviour.
  int64_t count(const std::string& key, int64_t lo, int64_t hi, const char* who) const;
  static constexpr int64_t kMaxCount = int64_t{1} << 53;  // the integers a double holds exactly
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update from the current gradients (parameters without a gradient are skipped).
  // A step gate installed by the Accelerator can turn this call into a no-op.
  void step();
  // Drops (set_to_none, the default) or zeroes every parameter's gradient; gated like step().
  void zero_grad(bool set_to_none = true);

  size_t num_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group = 0) const;
  std::vector<Tensor> all_params() const;
  // The learning rate of a group (schedulers write it through set_lr).
  double lr(size_t group = 0) const;
  void set_lr(double lr, size_t group = 0);
  // The value of any hyper-parameter of a group, by name ("lr", "weight_decay", "beta1", ...).
  double hyper(const std::string& name, size_t group = 0) const;

  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& sd);
  virtual const char* name() const = 0;

  // Step gate (for the Accelerator): when it returns false, step() and zero_grad() do nothing.
  void set_step_gate(std::function<bool()> gate) { gate_ = std::move(gate); }
  // Called around each update that runs, with the update itself (to time or trace it).
  void set_step_wrapper(std::function<void(const std::function<void()>& update)> wrapper) {
    wrapper_ = std::move(wrapper);
  }
  // Counts updates that really ran.
  int64_t steps_taken() const { return steps_taken_; }

 protected:
  struct Group {
    std::vector<Tensor> params;
    std::map<std::string, double> hyper;
  };
  Optimizer() = default;
  void add_group(std::vector<Tensor> params, std::map<std::string, double> hyper);
  // Per-parameter state tensors by name ("exp_avg"), created zero-filled like the parameter.
  Tensor& state(const Tensor& param, const std::string& key, bool* created = nullptr);
  int64_t& param_step(const Tensor& param);
  virtual void update() = 0;
  // Splits tensors for the fused kernels, which take one dtype and one device per call (groups in
  // order of first appearance, each keeping the tensors' order).
  static std::vector<std::vector<Tensor>> by_dtype_and_device(const std::vector<Tensor>& tensors);

  std::vector<Group> groups_;

 private:
  size_t index_of(const Tensor& param) const;
  std::unordered_map<const TensorImpl*, size_t> index_;  // parameter -> global index
  std::vector<std::map<std::string, Tensor>> state_;     // by global parameter index
  std::vector<int64_t> steps_;
  std::function<bool()> gate_;
  std::function<void(const std::function<void()>&)> wrapper_;
  int64_t steps_taken_ = 0;
};

// A group with its own options, for the constructors that take several groups.
template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

}  // namespace brisk::optim
