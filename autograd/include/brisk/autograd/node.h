// The graph: each recorded op is a Node holding edges to the nodes that produced its inputs
// and a backward closure that maps output gradients to input gradients. This is micrograd's
// idea grown up: a closure per op, run in reverse topological order.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/core/tensor_stamp.h"

namespace brisk::autograd {

struct Node;

// Where a gradient flows: output `input_nr` of `node` (null node: input needs no gradient).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// What a backward closure sees: the gradient of each output (zeros where a floating-point
// output got none; undefined for an integer output, which never has one) and which inputs need
// a gradient.
class GradCtx {
 public:
  GradCtx(const std::vector<Tensor>& grads, const std::vector<Edge>& next) : grads_(grads), next_(next) {}
  const Tensor& grad(size_t i = 0) const { return grads_[i]; }
  size_t num_grads() const { return grads_.size(); }
  bool needs(size_t input) const { return input < next_.size() && next_[input].valid(); }

 private:
  const std::vector<Tensor>& grads_;
  const std::vector<Edge>& next_;
};

// Returns one gradient per input (an undefined Tensor where none is needed).
using BackwardFn = std::function<std::vector<Tensor>(const GradCtx&)>;

struct OutputMeta {
  Shape sizes;
  DType dtype;
  Device device;
};

// A tensor an op's backward reads, with the version its storage had when it was saved: the
// engine refuses to run the backward when the two differ (the tensor changed in place).
struct SavedVersion {
  Storage storage;
  uint32_t version = 0;
  Shape sizes;
  DType dtype = DType::F32;
  uint32_t index = 0;  // position in the op's saved list, for the message
};

struct Node {
  std::string name;                 // the op, for error messages and graph printing
  std::vector<Edge> next;           // one per input
  std::vector<OutputMeta> outputs;  // one per output
  BackwardFn backward;              // released (empty) after use unless retain_graph
  std::vector<SavedVersion> saved;  // what backward reads, checked before it runs
  uint64_t sequence_nr = 0;         // creation order; later nodes run first
  bool is_accumulator = false;      // AccumulateGrad for a leaf
  std::weak_ptr<TensorImpl> leaf;   // the leaf, for accumulators
  bool released = false;
  // Non-leaf outputs whose gradient the user asked to keep (retain_grad): output index, tensor.
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Frees long chains iteratively (a recursive release of 100,000 nodes would overflow the stack).
  ~Node();
};

// Per-tensor autograd state, kept in the tensor's opaque autograd slot.
struct AutogradMeta : AutogradMetaBase {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::weak_ptr<Node> accumulator;  // leaves: the node that adds into .grad
  std::vector<std::function<void(const Tensor&)>> hooks;
  std::function<Tensor()> grad_buffer;  // leaves: where a fresh .grad goes (set_grad_buffer)
  bool retains_grad = false;
  // The storage's version when grad_fn was set: a view whose storage changed since (its base was
  // updated in place) has a stale grad_fn, and using it in a new op is refused.
  uint32_t version_at_record = 0;
  // Leaves: the copy of this tensor in a lower precision that an optimizer keeps for autocast
  // (set_autocast_copy; held weakly, the optimizer owns it) and this tensor's stamp when the copy
  // was last written: autocast uses the copy only while the stamp still matches.
  std::weak_ptr<TensorImpl> autocast_copy;
  TensorStamp autocast_copy_stamp;
};

// The meta of `t`, created on first use when `create`.
AutogradMeta* meta(const Tensor& t, bool create = false);
// The edge a gradient for `t` should flow into (its grad_fn output, or its leaf accumulator).
Edge gradient_edge(const Tensor& t);
bool requires_grad(const Tensor& t);
// True when grad mode is on and any input requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

// Records `outputs` as made by an op over `inputs`, when grad mode is on and any input requires
// grad. Closures must not capture an op's own outputs undetached (that would make a cycle):
// capture `out.detach()` instead.
// `saved`: the tensors the closure reads in backward (inputs, outputs, indices); their versions
// are checked before the backward runs, so an in-place change made after the forward is an
// error instead of a silently wrong gradient.
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn,
            const std::vector<Tensor>& saved = {});
inline void record(const char* name, const std::vector<Tensor>& inputs, const Tensor& output, BackwardFn fn,
                   const std::vector<Tensor>& saved = {}) {
  record(name, inputs, std::vector<Tensor>{output}, std::move(fn), saved);
}
// The next creation number for a node (what record() stamps on the nodes it makes), for code
// that builds a node itself (autograd::checkpoint).
uint64_t next_sequence_nr();
// Throws when a tensor saved by `node` was modified in place after it was saved.
void check_saved_versions(const Node& node);

// Sums `grad` down to `shape` (undoing broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace brisk::autograd
