// Autograd metadata, graph recording, and grad mode.
#include "brisk/autograd/node.h"

#include <atomic>

#include "brisk/autograd/grad_mode.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/reduce.h"

namespace brisk {

namespace {
thread_local bool tl_grad_enabled = true;
}
bool is_grad_enabled() {
  return tl_grad_enabled;
}
void set_grad_enabled(bool enabled) {
  tl_grad_enabled = enabled;
}

}  // namespace brisk

namespace brisk::autograd {

namespace {
std::atomic<uint64_t> g_sequence{0};
thread_local std::vector<std::shared_ptr<Node>>* tl_delete_queue = nullptr;
}  // namespace

Node::~Node() {
  if (tl_delete_queue) {  // an outer ~Node is draining: hand our edges to it
    for (Edge& e : next)
      if (e.node) tl_delete_queue->push_back(std::move(e.node));
    return;
  }
  std::vector<std::shared_ptr<Node>> queue;
  tl_delete_queue = &queue;
  for (Edge& e : next)
    if (e.node) queue.push_back(std::move(e.node));
  backward = nullptr;  // saved tensors may hold the last references to upstream nodes
  while (!queue.empty()) {
    std::shared_ptr<Node> n = std::move(queue.back());
    queue.pop_back();
    n.reset();
  }
  tl_delete_queue = nullptr;
}

AutogradMeta* meta(const Tensor& t, bool create) {
  TensorImpl* impl = t.impl();
  BRISK_CHECK(impl != nullptr, "autograd: operation on an undefined tensor");
  if (!impl->autograd) {
    if (!create) return nullptr;
    impl->autograd = std::make_shared<AutogradMeta>();
  }
  return static_cast<AutogradMeta*>(impl->autograd.get());
}

bool requires_grad(const Tensor& t) {
  if (!t.defined()) return false;
  AutogradMeta* m = meta(t);
  return m && (m->requires_grad || m->grad_fn);
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (requires_grad(*t)) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (requires_grad(t)) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!requires_grad(t)) return {};
  AutogradMeta* m = meta(t);
  if (m->grad_fn) {
    BRISK_CHECK(!t.impl()->is_view || t.version() == m->version_at_record, "autograd: a view (shape ", t.sizes(),
                ", made by ", m->grad_fn->name,
                ") is used after the tensor it views was changed in place (storage version ", m->version_at_record,
                " when the view was made, ", t.version(),
                " now), so its gradient history is out of date; take the view again after the in-place update");
    return {m->grad_fn, m->output_nr};
  }
  // A leaf: share one accumulator per leaf while any graph holds it.
  std::shared_ptr<Node> acc = m->accumulator.lock();
  if (!acc) {
    acc = std::make_shared<Node>();
    acc->name = "AccumulateGrad";
    acc->is_accumulator = true;
    acc->leaf = t.impl_ptr();
    acc->outputs.push_back({t.sizes(), t.dtype(), t.device()});
    acc->sequence_nr = UINT64_MAX;  // leaves run as soon as they are ready
    m->accumulator = acc;
  }
  return {acc, 0};
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn,
            const std::vector<Tensor>& saved) {
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<Node>();
  node->name = name;
  node->sequence_nr = g_sequence.fetch_add(1, std::memory_order_relaxed);
  node->next.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next.push_back(gradient_edge(t));
  node->backward = std::move(fn);
  node->saved.reserve(saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    const Tensor& t = saved[i];
    if (!t.defined()) continue;
    node->saved.push_back({t.storage(), t.version(), t.sizes(), t.dtype(), static_cast<uint32_t>(i)});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->outputs.push_back({out.sizes(), out.dtype(), out.device()});
    if (!is_floating(out.dtype())) continue;  // integer outputs (argmax, indices) carry no gradient
    AutogradMeta* m = meta(out, true);
    m->grad_fn = node;
    m->output_nr = static_cast<uint32_t>(i);
    m->version_at_record = out.version();
  }
}

uint64_t next_sequence_nr() {
  return g_sequence.fetch_add(1, std::memory_order_relaxed);
}

void check_saved_versions(const Node& node) {
  for (const SavedVersion& s : node.saved) {
    const uint32_t now = s.storage ? s.storage->version() : 0;
    BRISK_CHECK(now == s.version, "backward: one of the tensors needed for the gradient of ", node.name,
                " (saved tensor ", s.index, ", shape ", s.sizes, ", ", dtype_name(s.dtype),
                ") has been modified by an in-place operation: it was at version ", s.version, " when saved and is at ",
                "version ", now, " now. Do the in-place update after backward(), or on a clone()");
  }
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  BRISK_CHECK(lead >= 0, "sum_to: cannot reduce gradient of shape ", grad.sizes(), " to ", shape);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? grad : kernels::sum(grad, dims, /*keepdim=*/true);
  if (lead > 0 || r.sizes() != shape) {
    Strides st = contiguous_strides(shape);
    r = kernels::contiguous(r);
    r = r.as_strided(shape, st, r.offset());
  }
  return r;
}

}  // namespace brisk::autograd
