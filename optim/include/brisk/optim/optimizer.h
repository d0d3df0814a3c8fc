// Optimizer: parameter groups with their own hyper-parameters, per-parameter state, a fused
// step, zero_grad, and state dicts. Optimizers call kernels directly: no graph is recorded.
// Each kind of state (Adam's exp_avg, ...) is one contiguous buffer per (dtype, device) holding
// every parameter's slot, so a step is one multi-tensor pass over views of it, with no look-up by
// name; state dicts keep PyTorch's names ("state.<i>.exp_avg", "state.<i>.step").
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
  // For sharded data parallelism (the Accelerator's zero1 / zero2): group g's parameters become
  // params[g] (this rank's slice of the group's flattened parameters), so the state is allocated
  // for those only. The optimizer must have no state yet (else brisk::Error); hyper-parameters
  // are kept. One list per group, each a valid group (non-empty, floating-point leaves).
  void replace_params(std::vector<std::vector<Tensor>> params);
  // Counts updates that really ran.
  int64_t steps_taken() const { return steps_taken_; }

  // Autocast copies (docs/tour/04-mixed-precision.md): with dtype bf16 or f16, every f32 parameter
  // gets a copy in that dtype that each step rewrites right after updating the parameter (Adam
  // and AdamW in the same fused pass, reading the parameter once; other optimizers with one cast
  // after their update), and autocast uses the copy instead of casting the parameter in every
  // forward, for as long as the parameter is unchanged (any other write to it makes autocast cast
  // again). The first step writes every copy; parameters that skip a step keep a current one.
  // Memory: 2 bytes per parameter element, counted as optimizer state, not saved in state dicts.
  // F32 turns them off and frees them. The Accelerator turns them on for mixed_precision bf16 or
  // fp16 without sharding.
  void keep_autocast_copies(DType dtype);
  DType autocast_copies() const { return copies_dtype_; }

 protected:
  // A group's hyper-parameters in a fixed order that each optimizer names once (Adam: lr, beta1,
  // ...); step() reads them by index (`g.hyper[kLr]`), never by name.
  struct Group {
    std::vector<Tensor> params;
    std::vector<double> hyper;
    size_t first = 0;  // global index of params[0]
  };
  // names: the hyper-parameter names, in the order of every group's `hyper` (the state dict's
  // "param_groups.<g>.<name>"); states: the per-parameter state kinds ("exp_avg", ...), in the
  // order of kind indices.
  Optimizer(std::vector<std::string> hyper_names, std::vector<std::string> state_names)
      : hyper_names_(std::move(hyper_names)),
        state_names_(std::move(state_names)),
        flat_(state_names_.size()),
        views_(state_names_.size()) {}
  // Checks the parameters (non-empty, floating, leaves, each once) before the options, so that
  // a bad parameter list is reported first.
  void check_params(const std::vector<Tensor>& params) const;
  void add_group(std::vector<Tensor> params, std::vector<double> hyper);
  virtual void update() = 0;
  // Called by set_lr after the group's learning rate changed (capturable optimizers copy it to the GPU).
  virtual void lr_changed(size_t /*group*/) {}
  // Parameter i's autocast copy (global index): made on first use and remade when the parameter
  // changed shape or device; undefined when copies are off or the parameter is not f32. An
  // update that writes it registers it with autograd::set_autocast_copy.
  Tensor autocast_copy(size_t i);

  // --- per-parameter state -------------------------------------------------------------
  // Kind k of every parameter lives in one flat, zero-filled buffer per (dtype, device) of the
  // parameters (created on first use; slots 16-byte aligned); state(k, i) is parameter i's
  // slot, a view shaped like the parameter. Parameters moved to another dtype or device since
  // take their state along (relayout()).
  const Tensor& state(size_t kind, size_t i) {
    if (flat_[kind].empty()) allocate(kind);
    has_state_[i] |= 1u << kind;
    return views_[kind][i];
  }
  // Per parameter, bit k: kind k is in use (the parameter took a step that used it, or it was
  // loaded); the state dict lists only those, as PyTorch's does.
  std::vector<uint32_t> has_state_;
  std::vector<int64_t> steps_;  // per parameter, by global index
  // Re-lays the flat buffers out if a parameter's dtype or device changed (Module::to after the
  // first step), keeping the values (cast and copied).
  void relayout_if_moved();

  // Splits tensors for the fused kernels, which take one dtype and one device per call (groups in
  // order of first appearance, each keeping the tensors' order).
  static std::vector<std::vector<Tensor>> by_dtype_and_device(const std::vector<Tensor>& tensors);
  // The same for parameters given by global index.
  std::vector<std::vector<size_t>> by_dtype_and_device(const std::vector<size_t>& params) const;

  std::vector<Group> groups_;
  std::vector<Tensor> flat_params_;  // every parameter by global index

 private:
  void allocate(size_t kind);
  void layout();
  std::vector<std::string> hyper_names_, state_names_;
  // Layout: parameter i's slot is bucket_[i] at offset_[i]; buckets by (dtype, device).
  struct Bucket {
    DType dtype;
    Device device;
    int64_t numel = 0;
  };
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_;
  std::vector<int64_t> offset_;
  std::vector<std::vector<Tensor>> flat_;   // [kind][bucket]
  std::vector<std::vector<Tensor>> views_;  // [kind][parameter]
  // After an update: rewrites (one cast each) and registers the copies the update did not write.
  void refresh_autocast_copies();
  DType copies_dtype_ = DType::F32;  // F32: no copies
  std::vector<Tensor> copies_;       // by global parameter index, made on first use
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
