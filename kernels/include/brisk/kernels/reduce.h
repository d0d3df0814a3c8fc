// Reductions over any set of dims (with keepdim), softmax and log_softmax, cumsum, topk.
// Results are deterministic for a given thread count: each output element is reduced by one
// thread in a fixed order (floats accumulate in f64 for f32/f64 inputs... see reduce.cpp).
#pragma once
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

// dims empty = all dims. Negative dims wrap. Duplicate dims are an error.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

}  // namespace brisk::kernels
