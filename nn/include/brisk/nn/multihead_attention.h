// torch.nn.MultiheadAttention: query/key/value projections, scaled dot-product attention over
// num_heads heads, an output projection; parameters named as PyTorch's (in_proj_weight,
// in_proj_bias, out_proj.weight, out_proj.bias) so its state dicts load.
#pragma once
#include <tuple>

#include "brisk/nn/layers.h"

namespace brisk::nn {

struct MultiheadAttentionOptions {
  double dropout = 0.0;      // on the attention weights, in training mode
  bool bias = true;          // in_proj_bias and out_proj.bias
  bool batch_first = false;  // inputs (N, L, E) instead of PyTorch's default (L, N, E)
};

// forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights),
// as libtorch: query (L, N, E) (or (N, L, E) with batch_first), key and value (S, N, E);
// key_padding_mask (N, S) bool (true = ignore that key) or floating (added);
// attn_mask (L, S) or (N * num_heads, L, S) bool (true = may not attend) or floating (added).
// Returns (output like query, weights): weights (N, L, S) averaged over heads, (N, num_heads,
// L, S) without averaging, undefined when need_weights is false. A query whose keys are all
// masked gives NaN, as in PyTorch. m(x) is self-attention returning the output alone.
class MultiheadAttention : public CallableModule<MultiheadAttention> {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});
  Tensor forward(const Tensor& x) override;
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = Tensor(), bool need_weights = true,
                                     const Tensor& attn_mask = Tensor(), bool average_attn_weights = true);
  void reset_parameters();
  Tensor in_proj_weight, in_proj_bias;
  Linear out_proj;
  int64_t embed_dim, num_heads;
  MultiheadAttentionOptions options;
};

}  // namespace brisk::nn
