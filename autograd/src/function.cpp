// FunctionCtx: saved tensors for user-defined differentiable functions.
#include "brisk/autograd/function.h"

namespace brisk::autograd {

void FunctionCtx::save_for_backward(const std::vector<Tensor>& tensors) {
  saved_.clear();
  for (const Tensor& t : tensors) saved_.push_back(t.defined() ? t.detach() : Tensor());
}

const std::vector<Tensor>& FunctionCtx::saved() const {
  return saved_;
}

}  // namespace brisk::autograd
