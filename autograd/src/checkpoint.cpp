// Activation checkpointing: a node whose backward re-runs the forward with recording on and
// back-propagates through the recomputed graph (a nested pass of the engine).
#include "brisk/autograd/checkpoint.h"

#include <memory>

#include "brisk/autograd/engine.h"
#include "brisk/autograd/grad_mode.h"
#include "brisk/autograd/node.h"
#include "brisk/core/autocast.h"
#include "brisk/core/rng.h"

namespace brisk::autograd {

namespace {

// What the recomputation needs: the function, the inputs (detached handles) and the state the
// forward ran under.
struct CheckpointState {
  CheckpointMultiFn fn;
  std::vector<Tensor> inputs;
  std::vector<OutputMeta> outputs;
  bool preserve_rng = true;
  Generator::State rng{};
  AutocastState autocast{};
};

// Puts the generator and autocast state of the forward in place for the recomputation, and the
// current ones back afterwards (also when the function throws).
class ReplayGuard {
 public:
  explicit ReplayGuard(const CheckpointState& s)
      : preserve_rng_(s.preserve_rng), rng_(default_generator().state()), autocast_(autocast_state()) {
    if (preserve_rng_) default_generator().set_state(s.rng);
    set_autocast_state(s.autocast);
  }
  ~ReplayGuard() {
    if (preserve_rng_) default_generator().set_state(rng_);
    set_autocast_state(autocast_);
  }
  ReplayGuard(const ReplayGuard&) = delete;
  ReplayGuard& operator=(const ReplayGuard&) = delete;

 private:
  bool preserve_rng_;
  Generator::State rng_;
  AutocastState autocast_;
};

std::vector<Tensor> recompute_and_backward(const CheckpointState& s, const GradCtx& g) {
  // autograd::grad() returns gradients instead of accumulating them, but the recomputed graph can
  // only deliver the parameters' gradients by accumulating into .grad (as PyTorch's reentrant
  // checkpoint, which refuses .grad() too).
  BRISK_CHECK(in_backward_pass(),
              "checkpoint: autograd::grad() cannot differentiate through a checkpointed function "
              "(its parameters' gradients would go to .grad); use backward(), or call the function without checkpoint");
  const size_t n = s.inputs.size();
  std::vector<Tensor> detached(n);
  for (size_t i = 0; i < n; ++i) {
    if (!s.inputs[i].defined()) continue;
    detached[i] = s.inputs[i].detach();
    if (g.needs(i)) detached[i].requires_grad_(true);
  }
  std::vector<Tensor> outs;
  {
    ReplayGuard replay(s);
    EnableGradGuard enable;
    outs = s.fn(detached);
  }
  BRISK_CHECK(outs.size() == s.outputs.size(), "checkpoint: the recomputation returned ", outs.size(),
              " outputs, the forward ", s.outputs.size(), "; the function must be deterministic");
  std::vector<Tensor> roots, grads;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined()) continue;
    BRISK_CHECK(outs[i].sizes() == s.outputs[i].sizes, "checkpoint: output ", i, " of the recomputation has shape ",
                outs[i].sizes(), ", the forward's had ", s.outputs[i].sizes, "; the function must be deterministic");
    if (!requires_grad(outs[i])) continue;
    roots.push_back(outs[i]);
    grads.push_back(g.grad(i));
  }
  // A nested pass: parameters used by fn get their gradients accumulated here; callbacks queued
  // by hooks run when the outer pass ends.
  if (!roots.empty()) backward(roots, grads);
  std::vector<Tensor> result(n);
  for (size_t i = 0; i < n; ++i)
    if (g.needs(i)) result[i] = detached[i].grad();
  return result;
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointMultiFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  BRISK_CHECK(static_cast<bool>(fn), "checkpoint: the function is empty");
  if (!is_grad_enabled()) return fn(inputs);  // nothing is recorded: no graph to save memory on

  auto state = std::make_shared<CheckpointState>();
  state->fn = fn;
  state->preserve_rng = options.preserve_rng_state;
  if (state->preserve_rng) state->rng = default_generator().state();
  state->autocast = autocast_state();
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    outs = fn(inputs);
  }

  // The node is made even when no input requires grad: parameters used inside fn need their
  // gradients, and only the recomputation can tell which ones there are.
  auto node = std::make_shared<Node>();
  node->name = "checkpoint";
  node->sequence_nr = next_sequence_nr();
  node->next.reserve(inputs.size());
  state->inputs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    node->next.push_back(t.defined() ? gradient_edge(t) : Edge{});
    state->inputs.push_back(t.defined() ? t.detach() : Tensor());
    if (t.defined()) node->saved.push_back({t.storage(), t.version(), t.sizes(), t.dtype(), static_cast<uint32_t>(i)});
  }
  std::vector<Tensor> result(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined()) {
      node->outputs.push_back({Shape{}, DType::F32, Device{}});
      continue;
    }
    // A fresh handle per output: fn may return one of its inputs (or a captured tensor), whose own
    // autograd state must not change.
    result[i] = outs[i].detach();
    node->outputs.push_back({result[i].sizes(), result[i].dtype(), result[i].device()});
    if (!is_floating(result[i].dtype())) continue;
    AutogradMeta* m = meta(result[i], true);
    m->grad_fn = node;
    m->output_nr = static_cast<uint32_t>(i);
    m->version_at_record = result[i].version();  // (as record() does: later in-place writes are caught)
  }
  state->outputs = node->outputs;
  node->backward = [state](const GradCtx& g) { return recompute_and_backward(*state, g); };
  return result;
}

Tensor checkpoint(const CheckpointFn& fn, const Tensor& x, const CheckpointOptions& options) {
  BRISK_CHECK(static_cast<bool>(fn), "checkpoint: the function is empty");
  // fn by value: the backward runs it after this call has returned.
  std::vector<Tensor> out = checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
                                       std::vector<Tensor>{x}, options);
  return out[0];
}

}  // namespace brisk::autograd
