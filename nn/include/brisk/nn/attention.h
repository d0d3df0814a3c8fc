// GPT-2 building blocks: causal multi-head self-attention and the pre-norm transformer block.
#pragma once
#include "brisk/nn/layers.h"

namespace brisk::nn {

struct AttentionOptions {
  double dropout = 0.0;  // on attention weights and the output projection
  bool bias = true;
};

// x (B, T, C) -> (B, T, C); C = n_head * head_dim. Position t attends to positions <= t.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  Linear c_attn, c_proj;  // qkv projection (C -> 3C), output projection (C -> C)
  int64_t n_embd, n_head;

 private:
  Dropout attn_drop_, resid_drop_;
};

// x + attn(ln_1(x)), then x + mlp(ln_2(x)) with a 4C GELU(tanh) MLP, as GPT-2.
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t n_embd, int64_t n_head, AttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  LayerNorm ln_1, ln_2;
  CausalSelfAttention attn;
  Linear c_fc, c_proj;

 private:
  Dropout drop_;
};

}  // namespace brisk::nn
