// Activation checkpointing: trade compute for memory by not keeping a function's intermediate
// activations for the backward pass. The forward runs `fn` without recording a graph and keeps
// only its inputs; when the backward pass reaches the result, `fn` runs again with recording on
// (over detached copies of the inputs), and the incoming gradient is propagated through that
// recomputed graph: into the inputs' gradients, and into the .grad of every parameter (leaf)
// that `fn` uses.
//
//   for (auto& block : blocks)
//     x = autograd::checkpoint([&](const Tensor& h) { return block(h); }, x);
//
// The recomputation sees the same random numbers as the forward (the default generator's state is
// saved before the forward and restored around the recomputation, as PyTorch's preserve_rng_state
// does, so dropout masks match) and the same autocast state; the gradients are the same, bit for
// bit, as without checkpointing. Outside grad mode `fn` simply runs. docs/activation-checkpointing.md.
#pragma once
#include <functional>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::autograd {

struct CheckpointOptions {
  // Save the default generator's state before the forward and replay it in the recomputation.
  // Turn off only for functions that draw no random numbers (it is cheap either way).
  bool preserve_rng_state = true;
};

using CheckpointFn = std::function<Tensor(const Tensor&)>;
using CheckpointMultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// One input, one output.
Tensor checkpoint(const CheckpointFn& fn, const Tensor& x, const CheckpointOptions& options = {});
// Several inputs and outputs. Undefined inputs are passed through as they are; integer outputs
// carry no gradient. `fn` must be deterministic given its inputs and the generator state (it must
// return as many outputs, of the same shapes, when run again), and must not modify its inputs in
// place; changing an input in place between the forward and the backward is an error.
std::vector<Tensor> checkpoint(const CheckpointMultiFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {});

}  // namespace brisk::autograd
