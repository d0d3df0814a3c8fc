// The autocast weight cache (PyTorch's autocast cache): inside an autocast region, the
// lower-precision cast of a parameter (an f32 leaf that requires grad) is made by the first op
// that needs it and reused by every later op of the outermost region on this thread, so a weight
// used by several ops, or by several forwards in one region (gradient accumulation), is cast once.
// Leaving the outermost region (autocast_exit) empties the cache. An entry is served only while
// its parameter is unchanged since the cast (TensorStamp: no in-place write, optimizer step,
// load_state_dict or set_data), so it can never be stale. The cache holds the cast's data only:
// each use is given its own differentiable node back to the parameter (autograd/src/autocast.cpp).
#pragma once
#include <cstddef>

#include "brisk/core/tensor.h"

namespace brisk {

// The cast of `source` to `dtype` made in this region, or an undefined tensor when there is none
// or `source` changed since it was made.
Tensor autocast_cache_find(const Tensor& source, DType dtype);
// Remembers `cast` (source's values in cast's dtype, no autograd history) until the outermost
// region ends. Ignored outside a region (autocast_nesting() == 0).
void autocast_cache_put(const Tensor& source, const Tensor& cast);
// Entries held now (0 outside every region).
size_t autocast_cache_size();
void clear_autocast_cache();

}  // namespace brisk
