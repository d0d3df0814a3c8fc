// Causal self-attention and the transformer block.
#include "brisk/nn/attention.h"

#include <cmath>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/factory.h"

namespace brisk::nn {

CausalSelfAttention::CausalSelfAttention(int64_t c, int64_t h, AttentionOptions o)
    : c_attn(c, 3 * c, {.bias = o.bias}),
      c_proj(c, c, {.bias = o.bias}),
      n_embd(c),
      n_head(h),
      attn_drop_(o.dropout),
      resid_drop_(o.dropout) {
  BRISK_CHECK(h > 0 && c % h == 0, "CausalSelfAttention: n_embd ", c, " must be divisible by n_head ", h);
  register_modules({{"c_attn", c_attn}, {"c_proj", c_proj}, {"attn_drop", attn_drop_}, {"resid_drop", resid_drop_}});
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  BRISK_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expected input (B, T, ", n_embd,
              "), got shape ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1), hd = n_embd / n_head;
  Tensor packed = c_attn(x);  // (B, T, 3C): q, k, v side by side
  if (attn_drop_.p == 0 || !attn_drop_.is_training()) {
    // One op that computes only the scores each query may see, from the packed projection
    // (autograd/ops_attention.h): on a GPU no copy of q, k, v, the output or their gradients.
    return resid_drop_(c_proj(scaled_dot_product_attention_packed(packed, n_head, {.is_causal = true})));
  }
  auto qkv = split(packed, n_embd, 2);                                                       // 3 x (B, T, C)
  auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, hd}).transpose(1, 2); };  // (B, h, T, hd)
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  // With dropout on the attention weights: the ops one by one. The 1/sqrt(hd) scale is applied
  // to q (B, h, T, hd) rather than to the scores (B, h, T, T): the same product, on T/hd times
  // fewer elements.
  Tensor att = matmul(q * (1.0 / std::sqrt(static_cast<double>(hd))), k.transpose(-2, -1));  // (B, h, T, T)
  // The future is masked by adding -inf above the diagonal (a constant: its backward passes the
  // gradient through untouched, where masked_fill's would be another pass over (B, h, T, T)).
  Tensor future = triu(full({T, T}, -INFINITY, {.dtype = att.dtype(), .device = x.device()}), 1);
  att = softmax(att + future, -1);
  att = attn_drop_(att);
  Tensor y = matmul(att, v).transpose(1, 2).reshape({B, T, n_embd});  // (B, T, C)
  return resid_drop_(c_proj(y));
}

// The masked path, beside the default one above (which it matches when no mask is given).
Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask) {
  if (!attn_mask.defined() && !key_padding_mask.defined()) return forward(x);
  BRISK_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expected input (B, T, ", n_embd,
              "), got shape ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1), hd = n_embd / n_head;
  auto qkv = split(c_attn(x), n_embd, 2);
  auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, hd}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor att = matmul(q * (1.0 / std::sqrt(static_cast<double>(hd))), k.transpose(-2, -1));  // (B, h, T, T)
  Tensor future = triu(ones({T, T}, {.dtype = DType::Bool, .device = x.device()}), 1);
  att = masked_fill(att, future, -INFINITY);
  auto apply = [&](const Tensor& mask, const Tensor& as4d, const char* what) {
    BRISK_CHECK(mask.device() == x.device(), "CausalSelfAttention: ", what, " is on ", mask.device(),
                " but the input is on ", x.device());
    if (mask.dtype() == DType::Bool) {
      att = masked_fill(att, as4d, -INFINITY);
    } else {
      BRISK_CHECK(mask.is_floating_point(), "CausalSelfAttention: ", what, " must be bool or floating, got ",
                  dtype_name(mask.dtype()));
      att = att + as4d.to(att.dtype());
    }
  };
  if (attn_mask.defined()) {
    const Shape& s = attn_mask.sizes();
    const bool ok = (s == Shape{T, T}) || (s == Shape{B, T, T}) || (s == Shape{B, n_head, T, T});
    BRISK_CHECK(ok, "CausalSelfAttention: attn_mask must be (T, T), (B, T, T) or (B, n_head, T, T) = (", T, ", ", T,
                "), (", B, ", ", T, ", ", T, ") or (", B, ", ", n_head, ", ", T, ", ", T, "), got ", s);
    apply(attn_mask, attn_mask.dim() == 3 ? attn_mask.unsqueeze(1) : attn_mask, "attn_mask");
  }
  if (key_padding_mask.defined()) {
    BRISK_CHECK(key_padding_mask.sizes() == (Shape{B, T}), "CausalSelfAttention: key_padding_mask must be (B, T) = (",
                B, ", ", T, "), got ", key_padding_mask.sizes());
    apply(key_padding_mask, key_padding_mask.view({B, 1, 1, T}), "key_padding_mask");
  }
  att = attn_drop_(softmax(att, -1));
  Tensor y = matmul(att, v).transpose(1, 2).reshape({B, T, n_embd});
  return resid_drop_(c_proj(y));
}

TransformerBlock::TransformerBlock(int64_t c, int64_t h, AttentionOptions o)
    : ln_1(Shape{c}), ln_2(Shape{c}), attn(c, h, o), c_fc(c, 4 * c), c_proj(4 * c, c), drop_(o.dropout) {
  register_modules(
      {{"ln_1", ln_1}, {"attn", attn}, {"ln_2", ln_2}, {"c_fc", c_fc}, {"c_proj", c_proj}, {"drop", drop_}});
}

// The residual add after attention and ln_2 are one op (LayerNorm::forward_residual); so is the
// one after the MLP with the next LayerNorm in forward_fused.
Tensor TransformerBlock::forward(const Tensor& x) {
  auto [h, y] = ln_2.forward_residual(x, attn(ln_1(x)));
  return h + drop_(mlp(y));
}

Tensor TransformerBlock::forward(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask) {
  auto [h, y] = ln_2.forward_residual(x, attn(ln_1(x), attn_mask, key_padding_mask));
  return h + drop_(mlp(y));
}

Tensor TransformerBlock::mlp(const Tensor& y) {
  if (c_fc.has_hooks() || c_proj.has_hooks()) return c_proj(gelu(c_fc(y), GeluApproximation::Tanh));
  BRISK_CHECK(y.dim() >= 1 && y.size(-1) == c_fc.in_features, "TransformerBlock: expected input with last dim ",
              c_fc.in_features, ", got shape ", y.sizes());
  return gelu_mlp(y, c_fc.weight, c_fc.bias, c_proj.weight, c_proj.bias);
}

AddLayerNormOutput TransformerBlock::forward_fused(const Tensor& x, const Tensor& ln_1_x, LayerNorm& next) {
  auto [h, y] = ln_2.forward_residual(x, attn(ln_1_x.defined() ? ln_1_x : ln_1(x)));
  return next.forward_residual(h, drop_(mlp(y)));
}

}  // namespace brisk::nn
