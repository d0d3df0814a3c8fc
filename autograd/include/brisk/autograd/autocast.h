// How ops apply the autocast policy to their inputs: a differentiable cast, so gradients flow
// back to f32 parameters in f32.
#pragma once
#include "brisk/core/autocast.h"
#include "brisk/core/tensor.h"

namespace brisk::autograd {

// The tensor as the policy wants it for an op of `category` (itself when autocast is off, when it
// is not a floating tensor, or when it already has the target dtype; f64 is left alone).
Tensor autocast(const Tensor& t, AutocastCategory category);

}  // namespace brisk::autograd
