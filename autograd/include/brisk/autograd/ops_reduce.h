// Differentiable reductions over any set of dims (empty = all), with keepdim.
#pragma once
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk {

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

}  // namespace brisk
