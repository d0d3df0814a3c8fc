// Differentiable matrix products: matmul (PyTorch's shape rules for 1-D ... N-D operands with
// batch broadcasting) and linear (y = x W^T + b).
#pragma once
#include "brisk/core/tensor.h"

namespace brisk {

// 1-D . 1-D: dot product (0-D); 2-D . 2-D: matrix product; a 1-D operand is treated as a row
// (left) or column (right) and that dim is dropped from the result; N-D: batched, with the
// batch dims broadcast. Gradients are summed back over broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);

// x: (..., in_features); weight: (out_features, in_features); bias: (out_features) or
// undefined. Returns (..., out_features).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace brisk
