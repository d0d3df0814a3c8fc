// How ops apply the autocast policy to their inputs: a differentiable cast, so gradients flow
// back to f32 parameters in f32. A parameter's cast is reused rather than made again: an
// optimizer's current copy (set_autocast_copy) first, else the weight cache of the outermost
// autocast region (brisk/core/autocast_cache.h), else a new cast that the cache then keeps.
#pragma once
#include "brisk/core/autocast.h"
#include "brisk/core/tensor.h"

namespace brisk::autograd {

// The tensor as the policy wants it for an op of `category` (itself when autocast is off, when it
// is not a floating tensor, or when it already has the target dtype; f64 is left alone).
Tensor autocast(const Tensor& t, AutocastCategory category);

// Registers `copy` (a contiguous tensor shaped like the leaf `param`, on its device, in f16 or
// bf16, holding exactly param's values cast to that dtype) as param's current autocast copy: until
// param changes (any in-place write, set_data), autocast serves it instead of casting param. The
// caller owns the copy (it is held weakly here) and calls this again after each rewrite of it.
void set_autocast_copy(const Tensor& param, const Tensor& copy);
// param's registered copy in `dtype` when it is current, else an undefined tensor.
Tensor current_autocast_copy(const Tensor& param, DType dtype);

}  // namespace brisk::autograd
