// GPT-2 as OpenAI defined it (and nanoGPT / llm.c reproduce it): token + learned position
// embeddings, n_layer pre-LayerNorm nn::TransformerBlocks (causal self-attention, 4x GELU(tanh)
// MLP), a final LayerNorm and an output head tied to the token embedding. GPT-2's initialisation:
// weights and embeddings N(0, 0.02), the residual projections (every `c_proj.weight`)
// N(0, 0.02 / sqrt(2 * n_layer)), biases 0, LayerNorms weight 1 bias 0.
//
//   models::GPT2 model(models::GPT2Config::preset("small"));
//   Tensor logits = model(idx);                          // idx (B, T) int -> (B, T, vocab_size)
//   Tensor loss = models::GPT2::loss(logits, targets);   // mean cross entropy over B * T
//   optim::AdamW opt(model.param_groups({.lr = 6e-4, .weight_decay = 0.1}));
//   Tensor out = model.generate(prompt, 200, 0.8, 40, gen);  // with a key/value cache
//
// Hugging Face GPT-2 folders (config.json + model.safetensors, docs/pretrained.md):
//   auto [gpt2, report] = models::GPT2::from_pretrained("gpt2");    // GPT2LMHeadModel's weights
//   Tensor logits = (*gpt2)(idx, attention_mask);                   // mask (B, T): 1 token, 0 padding
//   gpt2->save_pretrained("out");
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "brisk/core/rng.h"
#include "brisk/models/pretrained.h"
#include "brisk/nn/attention.h"
#include "brisk/nn/layers.h"
#include "brisk/optim/adam.h"
#include "brisk/util/json.h"

namespace brisk::models {

struct GPT2Config {
  int64_t n_layer = 2, n_head = 2, n_embd = 64;
  int64_t block_size = 64;  // the longest context (rows of the position embedding)
  int64_t vocab_size = 256;
  double dropout = 0.0;  // after the embeddings, on attention weights and on each residual branch
  bool bias = true;      // biases in the linear layers and LayerNorms (only true is supported)
  // Recompute each block's forward during backward instead of keeping its activations
  // (autograd::checkpoint): the same gradients, bit for bit, for about a third more compute.
  bool activation_checkpointing = false;
  double layer_norm_epsilon = 1e-5;  // every LayerNorm's eps
  double initializer_range = 0.02;   // the std of GPT-2's init (the residual projections' scaled down)
  // Keys of a Hugging Face config.json that brisk does not use (bos_token_id, task_specific_params,
  // ...), kept to be written back by save_pretrained; null when the config was not read from one.
  json::Value other_keys = {};

  // "tiny" (2 layers, 2 heads, width 64, context 64, bytes: for tests), "small" (6, 6, 384, 256,
  // bytes: the CPU benchmark GPT), "124M" (12, 12, 768, 1024, vocabulary 50257 padded to 50304)
  // and "350M" (24, 16, 1024, 1024, 50304). An unknown name throws, listing these.
  static GPT2Config preset(const std::string& name);
  static std::vector<std::string> preset_names();
  // Throws brisk::Error naming the first field out of range.
  void validate() const;
  // Parameters of the model this config builds (the tied head counted once, the position
  // embedding included, as nanoGPT's get_num_params(non_embedding=False)):
  // 12 L C^2 + 13 L C + V C + T C + 2 C with biases.
  int64_t num_parameters() const;
  // The config of a Hugging Face GPT-2 folder (its config.json: n_layer, n_head, n_embd,
  // n_positions, vocab_size, layer_norm_epsilon, activation_function, the dropouts, ...), every value
  // type- and range-checked; model_type must be "gpt2" and architectures GPT2LMHeadModel or GPT2Model.
  static GPT2Config from_pretrained(const std::string& dir);
};

// What GPT2::from_pretrained may change from the folder.
struct GPT2PretrainedOptions {
  // The dropout rate instead of the config's (which must then not matter: brisk has one rate for
  // embd_pdrop, attn_pdrop and resid_pdrop, and refuses a config whose three differ without this).
  std::optional<double> dropout = std::nullopt;
  bool activation_checkpointing = false;
  // Tensors no GPT-2 model has are an error unless this is set (then the report lists them).
  bool allow_unexpected = false;
};

// The key/value cache of incremental decoding: per layer, the keys and values of the positions
// seen so far, (B, n_head, length, head_dim) each.
struct KVCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
  void clear() {
    k.clear();
    v.clear();
    length = 0;
  }
};

class GPT2 : public nn::CallableModule<GPT2> {
 public:
  explicit GPT2(GPT2Config config);
  // idx (B, T) integer tokens in [0, vocab_size), T <= block_size -> logits (B, T, vocab_size).
  Tensor forward(const Tensor& idx) override;
  // With an attention mask (B, T) of 1 (a token) and 0 (padding, any numeric dtype; undefined: all
  // tokens): no position attends to a padding key (its score gets -1e4 added, finite in every dtype,
  // as transformers did up to v4.2x). Positions whose keys are all padding (left padding) get
  // unspecified values; every other position's logits equal transformers' GPT2LMHeadModel's.
  // Positions are 0 ... T-1 whatever the padding, as in transformers' forward.
  Tensor forward(const Tensor& idx, const Tensor& attention_mask);

  // Reads a Hugging Face GPT-2 folder (docs/pretrained.md): config.json and model.safetensors or
  // its shards, transformers' names with or without "transformer.", Conv1D weights transposed into
  // nn::Linear's layout, lm_head.weight (tied to wte) and the attention buffers ignored; f32, f16
  // and bf16 files load into the default dtype. Any mismatch throws one brisk::Error listing every
  // problem, with nothing returned.
  static Pretrained<GPT2> from_pretrained(const std::string& dir, const GPT2PretrainedOptions& options = {});
  // Writes config.json and the weights as transformers' GPT2LMHeadModel.save_pretrained does
  // ("transformer."-prefixed names, Conv1D layout, the tied head left out), in the model's dtype,
  // sharded above options.max_shard_size. The same model gives the same bytes.
  void save_pretrained(const std::string& dir, const SaveOptions& options = {}) const;
  // Mean cross entropy of logits (B, T, V) against targets (B, T), over all B * T positions.
  static Tensor loss(const Tensor& logits, const Tensor& targets);
  // AdamW groups as GPT-2 / nanoGPT train: `options` (with its weight_decay) for the parameters of
  // dim >= 2 (the linear weights and both embeddings), the same with weight_decay 0 for the rest
  // (biases, LayerNorms). Empty groups are left out.
  std::vector<optim::ParamGroup<optim::AdamWOptions>> param_groups(const optim::AdamWOptions& options) const;

  // Logits (B, n, V) of `idx` (B, n), the tokens at positions cache.length ... cache.length + n - 1,
  // attending to the cached keys and values of the earlier positions, which it then extends.
  // No autograd (call under NoGradGuard or not: it sets one). cache.length + n <= block_size.
  Tensor forward_cached(const Tensor& idx, KVCache& cache);
  // Appends max_new_tokens tokens to idx (B, T0), sampling each from softmax(logits / temperature)
  // restricted to the top_k most likely tokens (top_k <= 0: all); temperature 0 picks the most
  // likely token (greedy). Uses a key/value cache, so each new token within the context costs
  // O(length) instead of recomputing the prefix; once the sequence is longer than block_size the
  // context is the last block_size tokens, as nanoGPT crops it, and the cache is rebuilt from
  // them for each further token. Runs in eval mode (restoring the mode) without autograd.
  // Returns (B, T0 + max_new_tokens) int64.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, double temperature, int64_t top_k, Generator& gen);

  GPT2Config config;
  nn::Embedding wte, wpe;
  nn::Dropout drop;
  std::vector<std::shared_ptr<nn::TransformerBlock>> h;
  nn::LayerNorm ln_f;

 private:
  void init_weights();
  // The checked tokens' embeddings plus positions (dropout applied): the blocks' input (B, T, C).
  Tensor embed(const Tensor& idx);
  // Whether forward may run each block's last residual add with the next block's ln_1 (ln_f
  // after the last) as one op: not when any of them has hooks (ZeRO-3 gathers a block's
  // parameters in its hooks, so the next block's ln_1 is only there inside its own call).
  bool fuse_across_blocks() const;
  Tensor sample_next(const Tensor& logits, double temperature, int64_t top_k, Generator& gen) const;
};

}  // namespace brisk::models
