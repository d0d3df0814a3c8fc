// Whether an op may write its result into the memory of a tensor it was handed (internal): the
// rvalue overloads of relu, sigmoid, tanh and exp, and unary backward nodes writing the input's
// gradient over the output's (docs/how-brisk-works.md, "Reusing memory nobody else can see").
#pragma once
#include "brisk/core/allocator.h"
#include "brisk/core/tensor.h"

namespace brisk::autograd::detail {

// True when nothing but this one handle refers to t or its bytes (no other handle, view, saved
// copy or detached handle: both reference counts are 1), the bytes come from the device's own
// allocator (not pinned, memory-mapped or shared memory) and are activations or uncategorised
// (not parameters, gradients or optimizer state),
// t is contiguous, and it is not a leaf that requires grad. Only a caller that owns the handle
// (an rvalue, or a gradient the engine passed and drops afterwards) may then overwrite it.
// `storage_refs`: the references to the bytes expected besides nobody's (1: this handle's; 2 for a
// tensor a node captured and also saved for its version check, see overwritable_in_backward).
inline bool reusable(const Tensor& t, long storage_refs = 1) {
  if (!t.defined() || t.impl_ptr().use_count() != 1) return false;
  const Storage& s = t.storage();
  return s && s.use_count() == storage_refs && s->is_allocated() &&
         (s->category() == MemoryCategory::Activations || s->category() == MemoryCategory::Other) &&
         s->allocator() == allocator_for(s->device()) && t.is_contiguous() && !(t.is_leaf() && t.requires_grad());
}

// True inside a backward closure that the engine frees after this run (a backward without
// retain_graph): only then may the closure overwrite what it captured (engine.cpp).
bool closure_runs_last_time();

// For a backward closure that captured `t` (its only handle) and named it once in record()'s saved
// list (the node's version check holds the bytes' one other reference): true when it may write
// its result over t, since no user handle, view, other node's saved copy or detached handle can
// read t any more and the closure will not run again. Otherwise as reusable().
inline bool overwritable_in_backward(const Tensor& t) {
  return closure_runs_last_time() && reusable(t, 2);
}

// A new handle on t's bytes, without t's history or view mark: what an op that wrote its result
// over a reusable() t returns (t itself is being given up).
inline Tensor take_over(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.offset();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

}  // namespace brisk::autograd::detail
