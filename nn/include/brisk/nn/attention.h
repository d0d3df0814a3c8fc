// GPT-2 building blocks: causal multi-head self-attention and the pre-norm transformer block.
#pragma once
#include "brisk/nn/layers.h"

namespace brisk::nn {

struct AttentionOptions {
  double dropout = 0.0;  // on attention weights and the output projection
  bool bias = true;
};

// Optional masks on top of the causal one, as torch.nn.MultiheadAttention takes them:
//   attn_mask (T, T), (B, T, T) or (B, n_head, T, T): bool, true = may not attend; or floating,
//     added to the attention scores (-inf forbids);
//   key_padding_mask (B, T): bool, true = a padding key no query attends to; or floating, added.
// A query row with every key masked gives NaN, as in PyTorch (with right padding and the causal
// mask each query still sees key 0).
// x (B, T, C) -> (B, T, C); C = n_head * head_dim. Position t attends to positions <= t.
class CausalSelfAttention : public CallableModule<CausalSelfAttention> {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  // With masks (either may be undefined; both undefined is forward(x)): `attn(x, mask)`,
  // `attn(x, Tensor(), key_padding_mask)`.
  Tensor forward(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask = Tensor());
  Linear c_attn, c_proj;  // qkv projection (C -> 3C), output projection (C -> C)
  int64_t n_embd, n_head;

 private:
  Dropout attn_drop_, resid_drop_;
};

// x + attn(ln_1(x)), then x + mlp(ln_2(x)) with a 4C GELU(tanh) MLP, as GPT-2.
class TransformerBlock : public CallableModule<TransformerBlock> {
 public:
  TransformerBlock(int64_t n_embd, int64_t n_head, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  // The attention masks of CausalSelfAttention: `block(x, mask)`, `block(x, Tensor(), padding)`.
  Tensor forward(const Tensor& x, const Tensor& attn_mask, const Tensor& key_padding_mask = Tensor());
  // forward(x) with `next` (the following block's ln_1, or a final LayerNorm) fused into the
  // block's last residual add: returns {the block's output, next(output)}. ln_1_x is ln_1(x) when
  // the previous block computed it so, or undefined (computed here). Calls no hooks of this
  // block; the caller uses it only where the blocks have none (GPT2::forward).
  AddLayerNormOutput forward_fused(const Tensor& x, const Tensor& ln_1_x, LayerNorm& next);
  // The MLP, c_proj(gelu(c_fc(y), Tanh)) before dropout: one gelu_mlp op (GELU and its backward in
  // the products' cuBLASLt epilogues on the GPU) unless a hook on c_fc or c_proj must see its call.
  Tensor mlp(const Tensor& y);
  LayerNorm ln_1, ln_2;
  CausalSelfAttention attn;
  Linear c_fc, c_proj;

 private:
  Dropout drop_;
};

}  // namespace brisk::nn
