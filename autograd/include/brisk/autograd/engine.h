// The backward engine: an iterative walk in reverse creation order over the nodes reachable
// from the roots, summing gradients per node input, += into leaf .grad, leaf hooks when a
// leaf's gradient is final, and callbacks at the end of the pass.
#pragma once
#include <functional>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::autograd {

// Runs backward from `roots` with `grads` (ones for a scalar root when empty).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {}, bool retain_graph = false);

// Gradients of `outputs` with respect to `inputs`, returned instead of accumulated into .grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

// Queues fn to run once the backward pass in progress on this thread ends (throws outside one).
void queue_callback(std::function<void()> fn);
bool in_backward_pass();

// Where a leaf's gradient goes when its .grad is undefined: backward copies the gradient into
// the tensor fn returns (which must have the leaf's shape and dtype, and be contiguous) and makes
// it the .grad, instead of allocating a fresh buffer; an undefined return falls back to a fresh
// buffer. The data-parallel Reducer's shared-memory mode points gradients straight into its
// buckets this way (PyTorch DDP's gradient_as_bucket_view). nullptr removes it.
void set_grad_buffer(const Tensor& leaf, std::function<Tensor()> fn);

}  // namespace brisk::autograd
