// Scaled dot-product attention as one differentiable op (PyTorch's
// F.scaled_dot_product_attention without masks or dropout): softmax(q k^T * scale) v, causal or
// not. The causal form works in blocks of 64 queries, each against only the keys it may see, so
// the two products and the softmax touch about 5/8 of the (T, T) scores at T = 256 (1/2 + 1/(2 *
// blocks) in general), in the forward and in the backward; the masked scores are never computed.
#pragma once
#include <optional>

#include "brisk/core/tensor.h"

namespace brisk {

struct SdpaOptions {
  bool is_causal = false;                      // query t sees keys 0..t
  std::optional<double> scale = std::nullopt;  // default 1 / sqrt(head dim)
};

// q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv), the same leading dims (batch, heads); any
// strides. Returns (..., Tq, dv) contiguous. Causal needs Tq == Tk. Under autocast the products
// run in the low-precision dtype and the softmax in f32, as the unfused ops do. The result does
// not depend on the number of threads.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options = {});

}  // namespace brisk
