// The backward engine. No recursion anywhere: graph discovery and execution both use explicit
// stacks/queues, so a chain of 100,000 nodes runs in constant native stack.
#include "brisk/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <utility>

#include "brisk/autograd/grad_mode.h"
#include "brisk/autograd/node.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "reuse.h"

namespace brisk::autograd {

namespace {

struct PassState {
  std::vector<std::function<void()>> callbacks;
};
thread_local PassState* tl_pass = nullptr;

// Whether the closure running on this thread is run for the last time (no retain_graph); saved
// and restored around each closure, as a closure may run a backward of its own (checkpoint).
thread_local bool tl_last_run = false;
class LastRunScope {
 public:
  explicit LastRunScope(bool last) : prev_(std::exchange(tl_last_run, last)) {}
  ~LastRunScope() { tl_last_run = prev_; }
  LastRunScope(const LastRunScope&) = delete;
  LastRunScope& operator=(const LastRunScope&) = delete;

 private:
  bool prev_;
};

struct ByLatest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// The profiler's name for a node's backward: "conv2d" -> "Conv2dBackward", "max_pool2d" ->
// "MaxPool2dBackward" (PyTorch's grad_fn names, without the version digit).
const char* backward_name(const std::string& op) {
  thread_local std::unordered_map<std::string, const char*> cache;
  auto it = cache.find(op);
  if (it != cache.end()) return it->second;
  std::string name;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  name += "Backward";
  const char* interned = profiler::intern(name);
  cache.emplace(op, interned);
  return interned;
}

void accumulate_into_leaf(Node& acc, const Tensor& g) {
  profiler::Scope prof_scope("AccumulateGrad");
  std::shared_ptr<TensorImpl> leaf_impl = acc.leaf.lock();
  if (!leaf_impl) return;  // the leaf is gone: nobody can read its gradient
  Tensor leaf(leaf_impl);
  AutogradMeta* m = meta(leaf, true);
  if (!m->grad.defined()) {
    // Own the gradient: a fresh contiguous buffer counted as a gradient (or the buffer the
    // leaf's owner provides: set_grad_buffer).
    Tensor buf = m->grad_buffer ? m->grad_buffer() : Tensor();
    if (!buf.defined() && detail::reusable(g) && g.dtype() == leaf.dtype() && g.device() == leaf.device() &&
        g.sizes() == leaf.sizes() && g.offset() == 0 && g.nbytes() == g.storage()->nbytes()) {
      // Nothing else holds this gradient (the engine drops it next): it becomes .grad as it is,
      // without a copy (PyTorch's AccumulateGrad steals it the same way).
      g.storage()->set_category(MemoryCategory::Gradients);
      m->grad = detail::take_over(g);
      for (auto& hook : m->hooks) hook(m->grad);
      return;
    }
    if (buf.defined()) {
      BRISK_CHECK(buf.sizes() == leaf.sizes() && buf.dtype() == leaf.dtype() && buf.device() == leaf.device() &&
                      buf.is_contiguous(),
                  "backward: the gradient buffer provided for a leaf of shape ", leaf.sizes(), " (",
                  dtype_name(leaf.dtype()), ") is ", buf.sizes(), " (", dtype_name(buf.dtype()),
                  buf.is_contiguous() ? "" : ", not contiguous", ")");
    } else {
      MemoryCategoryGuard cat(MemoryCategory::Gradients);
      buf = empty(leaf.sizes(), leaf.dtype(), leaf.device());
    }
    kernels::copy_(buf, g);
    m->grad = buf;
  } else {
    kernels::add_(m->grad, g);
  }
  for (auto& hook : m->hooks) hook(m->grad);
}

// Runs the graph. `capture` (for autograd::grad) maps nodes whose input gradient is wanted
// to the slot in `captured`; those nodes are not executed past capture.
void run_backward(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool retain_graph,
                  const std::unordered_map<const Node*, size_t>* capture, std::vector<Tensor>* captured) {
  // 1. Count how many edges point at each reachable node.
  std::unordered_map<Node*, int> deps;
  {
    std::vector<Node*> stack;
    std::unordered_map<Node*, bool> seen;
    for (const Edge& e : roots)
      if (e.valid() && !seen[e.node.get()]) {
        seen[e.node.get()] = true;
        stack.push_back(e.node.get());
      }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (capture && capture->count(n)) continue;
      for (const Edge& e : n->next) {
        if (!e.valid()) continue;
        ++deps[e.node.get()];
        if (!seen[e.node.get()]) {
          seen[e.node.get()] = true;
          stack.push_back(e.node.get());
        }
      }
    }
  }

  // 2. Seed the input buffers with the root gradients.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_to_buffer = [&](Node* n, uint32_t slot, const Tensor& g) {
    auto& buf = buffers[n];
    if (buf.empty()) buf.resize(n->outputs.size());
    if (!buf[slot].defined()) {
      buf[slot] = g;
    } else {
      buf[slot] = kernels::binary(kernels::BinaryOp::Add, buf[slot], g);
    }
  };
  std::priority_queue<Node*, std::vector<Node*>, ByLatest> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid()) continue;
    add_to_buffer(roots[i].node.get(), roots[i].input_nr, root_grads[i]);
  }
  for (const Edge& e : roots)
    if (e.valid() && deps[e.node.get()] == 0) {
      deps[e.node.get()] = -1;  // queued
      ready.push(e.node.get());
    }

  // 3. Execute in reverse creation order as nodes become ready.
  NoGradGuard no_grad;
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(n->outputs.size());
    if (capture) {
      auto it = capture->find(n);
      if (it != capture->end()) {
        (*captured)[it->second] = grads[0];
        continue;
      }
    }
    if (n->is_accumulator) {
      if (grads[0].defined()) accumulate_into_leaf(*n, grads[0]);
      continue;
    }
    BRISK_CHECK(!n->released, "backward: trying to backward through the graph a second time (node ", n->name,
                "); its saved tensors were freed. Pass retain_graph=true to the first backward call");
    profiler::Scope node_scope(profiler::enabled() ? backward_name(n->name) : "");
    for (auto& [nr, weak] : n->retained) {
      std::shared_ptr<TensorImpl> impl = weak.lock();
      if (!impl || !grads[nr].defined()) continue;
      AutogradMeta* m = meta(Tensor(impl), true);
      m->grad = m->grad.defined() ? kernels::binary(kernels::BinaryOp::Add, m->grad, grads[nr])
                                  : kernels::cast(grads[nr], grads[nr].dtype());
    }
    // Outputs that got no gradient read as zeros, except integer ones (max_pool2d's indices):
    // they cannot carry a gradient, and a zero fill of their size would be wasted on every step.
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined() && is_floating(n->outputs[i].dtype)) {
        const OutputMeta& om = n->outputs[i];
        grads[i] = zeros(om.sizes, {om.dtype, om.device});
      }
    check_saved_versions(*n);
    std::vector<Tensor> in_grads;
    {
      LastRunScope last_run(!retain_graph);
      in_grads = n->backward(GradCtx(grads, n->next));
    }
    BRISK_CHECK(in_grads.size() == n->next.size(), "backward: node ", n->name, " returned ", in_grads.size(),
                " gradients for ", n->next.size(), " inputs");
    if (!retain_graph) {
      n->backward = nullptr;  // frees the saved tensors
      n->saved.clear();
      n->released = true;
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.valid()) continue;
      Node* child = e.node.get();
      if (in_grads[i].defined()) {
        const OutputMeta& om = child->outputs[e.input_nr];
        BRISK_CHECK(in_grads[i].sizes() == om.sizes, "backward: node ", n->name, " produced a gradient of shape ",
                    in_grads[i].sizes(), " for input ", i, " of shape ", om.sizes);
        // A tensor's gradient has the tensor's dtype (as PyTorch's engine ensures): an f32 op fed a
        // bf16 tensor under autocast (a residual add, a norm) hands back f32, cast here once.
        if (in_grads[i].dtype() != om.dtype) in_grads[i] = kernels::cast(in_grads[i], om.dtype);
        add_to_buffer(child, e.input_nr, in_grads[i]);
      }
      if (--deps[child] == 0) {
        deps[child] = -1;
        ready.push(child);
      }
    }
  }
}

}  // namespace

bool detail::closure_runs_last_time() {
  return tl_last_run;
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  BRISK_CHECK(grads.empty() || grads.size() == roots.size(), "backward: got ", grads.size(), " gradients for ",
              roots.size(), " roots");
  std::vector<Edge> edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    BRISK_CHECK(requires_grad(r), "backward: tensor ", i, " (shape ", r.sizes(),
                ") does not require grad and has no grad_fn; call requires_grad_() on the inputs first");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      BRISK_CHECK(r.numel() == 1, "backward: grad can be implicitly created only for scalar outputs, got shape ",
                  r.sizes(), "; pass a gradient of the same shape");
      g = ones_like(r);
    }
    BRISK_CHECK(g.sizes() == r.sizes(), "backward: gradient shape ", g.sizes(), " does not match output shape ",
                r.sizes());
    edges.push_back(gradient_edge(r));
    root_grads.push_back(g);
  }
  // A pass started inside a running one (a checkpoint's recomputation, from a node's backward) is
  // part of it: what its hooks queue runs when the outer pass ends, not when this one does.
  if (tl_pass != nullptr) {
    run_backward(edges, root_grads, retain_graph, nullptr, nullptr);
    return;
  }
  // The whole pass, end-of-pass callbacks included (the Reducer's finalize runs there).
  profiler::Scope prof_scope("autograd::backward");
  PassState state;
  PassState* prev = tl_pass;
  tl_pass = &state;
  try {
    run_backward(edges, root_grads, retain_graph, nullptr, nullptr);
    // Still inside the pass: callbacks may queue more callbacks; run until none are left.
    for (size_t i = 0; i < state.callbacks.size(); ++i) {
      auto fn = std::move(state.callbacks[i]);
      fn();
    }
  } catch (...) {
    tl_pass = prev;
    throw;
  }
  tl_pass = prev;
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph) {
  std::vector<Edge> edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    BRISK_CHECK(requires_grad(outputs[i]), "grad: output ", i, " does not require grad");
    Tensor g = i < grad_outputs.size() ? grad_outputs[i] : Tensor();
    if (!g.defined()) {
      BRISK_CHECK(outputs[i].numel() == 1, "grad: implicit gradient needs a scalar output, got shape ",
                  outputs[i].sizes());
      g = ones_like(outputs[i]);
    }
    edges.push_back(gradient_edge(outputs[i]));
    root_grads.push_back(g);
  }
  std::unordered_map<const Node*, size_t> capture;
  std::vector<std::shared_ptr<Node>> keep;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BRISK_CHECK(requires_grad(inputs[i]), "grad: input ", i, " does not require grad");
    Edge e = gradient_edge(inputs[i]);
    BRISK_CHECK(e.node->outputs.size() == 1 || e.input_nr == 0,
                "grad: inputs that are outputs of multi-output ops are not supported");
    capture[e.node.get()] = i;
    keep.push_back(e.node);
  }
  std::vector<Tensor> result(inputs.size());
  profiler::Scope prof_scope("autograd::grad");
  run_backward(edges, root_grads, retain_graph, &capture, &result);
  for (size_t i = 0; i < result.size(); ++i)
    if (!result[i].defined()) result[i] = zeros_like(inputs[i]);
  return result;
}

void queue_callback(std::function<void()> fn) {
  BRISK_CHECK(tl_pass != nullptr, "queue_callback: no backward pass is running on this thread");
  tl_pass->callbacks.push_back(std::move(fn));
}

void set_grad_buffer(const Tensor& leaf, std::function<Tensor()> fn) {
  BRISK_CHECK(leaf.defined() && leaf.is_leaf(), "set_grad_buffer: gradients accumulate into leaf tensors only",
              leaf.defined() ? "; this tensor was made by an op" : "; the tensor is undefined");
  meta(leaf, true)->grad_buffer = std::move(fn);
}

bool in_backward_pass() {
  return tl_pass != nullptr;
}

}  // namespace brisk::autograd
