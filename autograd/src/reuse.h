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
inline bool reusable(const Tensor& t) {
  if (!t.defined() || t.impl_ptr().use_count() != 1) return false;
  const Storage& s = t.storage();
  return s && s.use_count() == 1 && s->is_allocated() &&
         (s->category() == MemoryCategory::Activations || s->category() == MemoryCategory::Other) &&
         s->allocator() == allocator_for(s->device()) && t.is_contiguous() && !(t.is_leaf() && t.requires_grad());
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
