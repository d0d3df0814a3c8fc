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

}  // namespace brisk::autograd
