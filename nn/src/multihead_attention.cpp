// MultiheadAttention from differentiable ops (linear, matmul, softmax, masked_fill, dropout).
#include "brisk/nn/multihead_attention.h"

#include <cmath>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/factory.h"
#include "brisk/nn/init.h"

namespace brisk::nn {

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o)
    : out_proj(e, e, {.bias = o.bias}), embed_dim(e), num_heads(h), options(o) {
  BRISK_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim ", e, " must be divisible by num_heads ", h);
  BRISK_CHECK(o.dropout >= 0 && o.dropout <= 1, "MultiheadAttention: dropout must be in [0, 1], got ", o.dropout);
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
  register_module("out_proj", out_proj);
  reset_parameters();
}

// As PyTorch: xavier_uniform in_proj_weight, zero biases, out_proj.weight as a Linear's.
void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj.bias.defined()) init::zeros_(out_proj.bias);
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  return std::get<0>(forward(x, x, x, Tensor(), false));
}

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                       const Tensor& key_padding_mask, bool need_weights,
                                                       const Tensor& attn_mask, bool average_attn_weights) {
  const int64_t E = embed_dim, H = num_heads, hd = E / H;
  auto check3 = [&](const Tensor& t, const char* what) {
    BRISK_CHECK(t.dim() == 3 && t.size(2) == E, "MultiheadAttention: ", what, " must be ",
                options.batch_first ? "(N, L, " : "(L, N, ", E, "), got shape ", t.sizes());
  };
  check3(query, "query");
  check3(key, "key");
  check3(value, "value");
  // Batch first from here on: (N, L, E).
  Tensor q = options.batch_first ? query : query.transpose(0, 1);
  Tensor k = options.batch_first ? key : key.transpose(0, 1);
  Tensor v = options.batch_first ? value : value.transpose(0, 1);
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1);
  BRISK_CHECK(k.size(0) == N && v.size(0) == N && v.size(1) == S, "MultiheadAttention: query ", query.sizes(), ", key ",
              key.sizes(), " and value ", value.sizes(), " disagree on the batch or source length");
  auto part = [&](int64_t i) {
    return std::pair{in_proj_weight.narrow(0, i * E, E),
                     in_proj_bias.defined() ? in_proj_bias.narrow(0, i * E, E) : Tensor()};
  };
  auto heads = [&](const Tensor& t, int64_t len) { return t.reshape({N, len, H, hd}).transpose(1, 2); };
  auto [wq, bq] = part(0);
  auto [wk, bk] = part(1);
  auto [wv, bv] = part(2);
  Tensor qh = heads(linear(q, wq, bq), L), kh = heads(linear(k, wk, bk), S), vh = heads(linear(v, wv, bv), S);
  Tensor att = matmul(qh * (1.0 / std::sqrt(static_cast<double>(hd))), kh.transpose(-2, -1));  // (N, H, L, S)
  auto apply = [&](const Tensor& mask, const Tensor& as4d, const char* what) {
    BRISK_CHECK(mask.device() == att.device(), "MultiheadAttention: ", what, " is on ", mask.device(),
                " but the inputs are on ", att.device());
    if (mask.dtype() == DType::Bool) {
      att = masked_fill(att, as4d, -INFINITY);
    } else {
      BRISK_CHECK(mask.is_floating_point(), "MultiheadAttention: ", what, " must be bool or floating, got ",
                  dtype_name(mask.dtype()));
      att = att + as4d.to(att.dtype());
    }
  };
  if (attn_mask.defined()) {
    const Shape& s = attn_mask.sizes();
    BRISK_CHECK(s == (Shape{L, S}) || s == (Shape{N * H, L, S}), "MultiheadAttention: attn_mask must be (L, S) = (", L,
                ", ", S, ") or (N * num_heads, L, S) = (", N * H, ", ", L, ", ", S, "), got ", s);
    apply(attn_mask, attn_mask.dim() == 3 ? attn_mask.view({N, H, L, S}) : attn_mask, "attn_mask");
  }
  if (key_padding_mask.defined()) {
    BRISK_CHECK(key_padding_mask.sizes() == (Shape{N, S}), "MultiheadAttention: key_padding_mask must be (N, S) = (", N,
                ", ", S, "), got ", key_padding_mask.sizes());
    apply(key_padding_mask, key_padding_mask.view({N, 1, 1, S}), "key_padding_mask");
  }
  att = softmax(att, -1);
  if (is_training() && options.dropout > 0) att = dropout(att, options.dropout, true);
  Tensor y = out_proj(matmul(att, vh).transpose(1, 2).reshape({N, L, E}));  // (N, L, E)
  if (!options.batch_first) y = y.transpose(0, 1);
  Tensor weights;
  if (need_weights) weights = average_attn_weights ? mean(att, {1}) : att;
  return {y, weights};
}

}  // namespace brisk::nn
