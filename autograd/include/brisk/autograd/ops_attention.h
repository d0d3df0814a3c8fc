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
// strides. Returns (..., Tq, dv): contiguous, except from the fused CUDA kernels, which return
// (B, H, Tq, dv) in (B, Tq, H, dv) memory as PyTorch's flash attention does (its transpose(1, 2)
// is contiguous). Causal needs Tq == Tk. Under autocast the products run in the low-precision
// dtype and the softmax in f32, as the unfused ops do. The result does not depend on the number
// of threads.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& options = {});

// Attention over a packed projection, as a GPT block makes it: qkv (B, T, 3C) holds q, k and v
// side by side along its last dim (C = n_head * head dim each, the heads in order within each);
// returns (B, T, C), the heads' outputs side by side. The same as splitting qkv in three, viewing
// each part as (B, n_head, T, head dim), scaled_dot_product_attention, and merging the heads
// back (which is what runs on the CPU and wherever the fused kernels do not apply); with the
// fused CUDA kernels the kernels read the heads in place and write the output and the packed
// gradient of qkv directly, with no copy in between.
Tensor scaled_dot_product_attention_packed(const Tensor& qkv, int64_t n_head, const SdpaOptions& options = {});

}  // namespace brisk
