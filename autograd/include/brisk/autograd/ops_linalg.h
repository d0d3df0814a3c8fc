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

// The GELU MLP of a transformer block as one op: linear(gelu(linear(x, w1, b1), Tanh), w2, b2)
// with x (..., in), w1 (hidden, in), w2 (out, hidden), biases (hidden) and (out) or undefined.
// Same values and gradients as that composite (on the CPU the same operations, so the same bits).
// On the GPU the first product applies bias and GELU in cuBLASLt's epilogue and keeps the
// pre-activation (what GELU's backward reads) as its auxiliary output; backward computes the
// pre-activation's gradient and b1's in the product of the output gradient with w2 (the DGELU_BGRAD
// epilogue), with no GELU, GELU-backward or bias-sum kernel. Where cuBLASLt refuses an epilogue
// (kernels::gelu_epilogue_fallback_reason says why) the composite's kernels run instead. The
// hidden activations are internal: code that must see them (a hook) calls the composite.
Tensor gelu_mlp(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2);

}  // namespace brisk
