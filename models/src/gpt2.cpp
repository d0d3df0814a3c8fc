// GPT-2: the model, its presets, GPT-2's initialisation, and cached generation.
#include "brisk/models/gpt2.h"

#include "brisk/autograd/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "brisk/autograd/autograd.h"
#include "brisk/kernels/factory.h"
#include "brisk/nn/init.h"

namespace brisk::models {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> GPT2Config::preset_names() {
  return {"tiny", "small", "124M", "350M"};
}

GPT2Config GPT2Config::preset(const std::string& name) {
  GPT2Config c;
  if (name == "tiny") {
    c.n_layer = 2, c.n_head = 2, c.n_embd = 64, c.block_size = 64, c.vocab_size = 256;
  } else if (name == "small") {
    c.n_layer = 6, c.n_head = 6, c.n_embd = 384, c.block_size = 256, c.vocab_size = 256;
  } else if (name == "124M") {
    c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.block_size = 1024, c.vocab_size = 50304;
  } else if (name == "350M") {
    c.n_layer = 24, c.n_head = 16, c.n_embd = 1024, c.block_size = 1024, c.vocab_size = 50304;
  } else {
    std::string valid;
    for (const std::string& n : preset_names()) valid += (valid.empty() ? "" : ", ") + n;
    BRISK_CHECK(false, "GPT2Config: unknown preset '", name, "' (valid: ", valid, ")");
  }
  return c;
}

void GPT2Config::validate() const {
  BRISK_CHECK(n_layer >= 1, "GPT2Config: n_layer must be >= 1, got ", n_layer);
  BRISK_CHECK(n_head >= 1, "GPT2Config: n_head must be >= 1, got ", n_head);
  BRISK_CHECK(n_embd >= 1 && n_embd % n_head == 0, "GPT2Config: n_embd (", n_embd,
              ") must be positive and divisible by n_head (", n_head, ")");
  BRISK_CHECK(block_size >= 1, "GPT2Config: block_size must be >= 1, got ", block_size);
  BRISK_CHECK(vocab_size >= 1, "GPT2Config: vocab_size must be >= 1, got ", vocab_size);
  BRISK_CHECK(dropout >= 0.0 && dropout < 1.0, "GPT2Config: dropout must be in [0, 1), got ", dropout);
  BRISK_CHECK(layer_norm_epsilon > 0 && std::isfinite(layer_norm_epsilon),
              "GPT2Config: layer_norm_epsilon must be positive, got ", layer_norm_epsilon);
  BRISK_CHECK(initializer_range >= 0 && std::isfinite(initializer_range),
              "GPT2Config: initializer_range must be >= 0, got ", initializer_range);
  BRISK_CHECK(bias, "GPT2Config: bias = false is not supported (nn::TransformerBlock's MLP and LayerNorms ",
              "always have biases)");
}

int64_t GPT2Config::num_parameters() const {
  const int64_t L = n_layer, C = n_embd;
  return 12 * L * C * C + 13 * L * C + vocab_size * C + block_size * C + 2 * C;
}

GPT2::GPT2(const GPT2Config& c)
    : config((c.validate(), c)),
      wte(c.vocab_size, c.n_embd),
      wpe(c.block_size, c.n_embd),
      drop(c.dropout),
      ln_f(Shape{c.n_embd}) {
  register_modules({{"wte", wte}, {"wpe", wpe}, {"drop", drop}});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    char name[24];  // not "h" + std::to_string(l): GCC 12 warns falsely (-Wrestrict) inside it
    std::snprintf(name, sizeof name, "h%lld", static_cast<long long>(l));
    h.push_back(
        register_module(name, std::make_shared<nn::TransformerBlock>(
                                  c.n_embd, c.n_head, nn::AttentionOptions{.dropout = c.dropout, .bias = c.bias})));
  }
  register_module("ln_f", ln_f);
  ln_f.eps = c.layer_norm_epsilon;
  for (auto& b : h) b->ln_1.eps = b->ln_2.eps = c.layer_norm_epsilon;
  init_weights();
}

void GPT2::init_weights() {
  const double std = config.initializer_range;
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  for (auto& [name, p] : named_parameters()) {
    if (name.find("ln_") != std::string::npos) continue;  // LayerNorms: weight 1, bias 0 already
    if (p.dim() >= 2) {
      nn::init::normal_(p, 0.0, ends_with(name, "c_proj.weight") ? residual_std : std);
    } else {
      nn::init::zeros_(p);
    }
  }
}

Tensor GPT2::embed(const Tensor& idx) {
  BRISK_CHECK(idx.dim() == 2, "GPT2: expected token indices (B, T), got shape ", idx.sizes());
  BRISK_CHECK(idx.dtype() == DType::I64 || idx.dtype() == DType::I32, "GPT2: token indices must be i32 or i64, got ",
              dtype_name(idx.dtype()));
  const int64_t T = idx.size(1);
  BRISK_CHECK(T >= 1 && T <= config.block_size, "GPT2: sequence length ", T,
              " must be in [1, block_size = ", config.block_size, "]");
  return drop(wte(idx) + wpe(arange(T, {.dtype = DType::I64, .device = idx.device()})));
}

Tensor GPT2::forward(const Tensor& idx) {
  Tensor x = embed(idx);
  if (fuse_across_blocks() && !(config.activation_checkpointing && is_grad_enabled() && is_training())) {
    // Each block's last residual add and the next block's ln_1 (ln_f after the last) are one op:
    // the same values and gradients as the loop below, one pass over the residual stream fewer.
    Tensor normed;  // ln_1 of the next block's input
    for (size_t l = 0; l < h.size(); ++l) {
      AddLayerNormOutput o = h[l]->forward_fused(x, normed, l + 1 < h.size() ? h[l + 1]->ln_1 : ln_f);
      x = o.h;
      normed = o.y;
    }
    return linear(normed, wte.weight);  // tied head: x W_te^T
  }
  for (auto& b : h) {
    if (config.activation_checkpointing && is_grad_enabled() && is_training())
      x = autograd::checkpoint([blk = b](const Tensor& in) { return (*blk)(in); }, x);
    else
      x = (*b)(x);
  }
  return linear(ln_f(x), wte.weight);  // tied head: x W_te^T
}

Tensor GPT2::forward(const Tensor& idx, const Tensor& attention_mask) {
  if (!attention_mask.defined()) return forward(idx);
  BRISK_CHECK(attention_mask.sizes() == idx.sizes(), "GPT2: attention_mask must have the shape of the tokens ",
              idx.sizes(), ", got ", attention_mask.sizes());
  // 0 for tokens, -1e4 for padding, added to the scores: finite in f16, bf16 and f32, so a query
  // whose keys are all padding gets finite (unspecified) values instead of NaNs that would reach
  // every position through the next layer's zero attention weights (0 * NaN).
  Tensor padding = (attention_mask.detach().to(DType::F32) - 1.0) * 1e4;
  Tensor x = embed(idx);
  for (auto& b : h) {
    if (config.activation_checkpointing && is_grad_enabled() && is_training())
      x = autograd::checkpoint([blk = b, padding](const Tensor& in) { return (*blk)(in, Tensor(), padding); }, x);
    else
      x = (*b)(x, Tensor(), padding);
  }
  return linear(ln_f(x), wte.weight);
}

bool GPT2::fuse_across_blocks() const {
  if (h.empty() || ln_f.has_hooks()) return false;
  for (const auto& b : h)
    if (b->has_hooks() || b->ln_1.has_hooks()) return false;
  return true;
}

Tensor GPT2::loss(const Tensor& logits, const Tensor& targets) {
  BRISK_CHECK(
      logits.dim() == 3 && targets.dim() == 2 && logits.size(0) == targets.size(0) && logits.size(1) == targets.size(1),
      "GPT2::loss: expected logits (B, T, V) and targets (B, T), got ", logits.sizes(), " and ", targets.sizes());
  const int64_t BT = logits.size(0) * logits.size(1);
  return cross_entropy(reshape(logits, {BT, logits.size(2)}), reshape(targets, {BT}));
}

std::vector<optim::ParamGroup<optim::AdamWOptions>> GPT2::param_groups(const optim::AdamWOptions& options) const {
  return optim::decay_matrices_only(parameters(), options);
}

Tensor GPT2::forward_cached(const Tensor& idx, KVCache& cache) {
  NoGradGuard no_grad;
  BRISK_CHECK(idx.dim() == 2 && idx.size(1) >= 1, "GPT2::forward_cached: expected token indices (B, n), got shape ",
              idx.sizes());
  const int64_t B = idx.size(0), n = idx.size(1), p = cache.length, C = config.n_embd, nh = config.n_head, hd = C / nh;
  BRISK_CHECK(p + n <= config.block_size, "GPT2::forward_cached: ", p, " cached + ", n,
              " new positions exceed block_size = ", config.block_size);
  if (p == 0) {
    cache.k.assign(h.size(), Tensor());
    cache.v.assign(h.size(), Tensor());
  }
  BRISK_CHECK(cache.k.size() == h.size() && (p == 0 || cache.k[0].size(0) == B),
              "GPT2::forward_cached: the cache holds another model's or batch's keys");
  Tensor x = wte(idx) + wpe(arange(static_cast<double>(p), static_cast<double>(p + n), 1.0,
                                   {.dtype = DType::I64, .device = idx.device()}));
  // New query i (position p + i) sees keys 0 ... p + i: mask the keys after it.
  Tensor future;
  if (n > 1) future = triu(full({n, p + n}, -INFINITY, {.dtype = x.dtype(), .device = x.device()}), p + 1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  // As in forward: the residual adds with the LayerNorm after them as one op (across blocks too
  // when no hooks are registered); `normed` is ln_1(x) when the previous block computed it.
  const bool fused = fuse_across_blocks();
  Tensor normed;
  for (size_t l = 0; l < h.size(); ++l) {
    nn::TransformerBlock& b = *h[l];
    auto qkv = split(b.attn.c_attn(normed.defined() ? normed : b.ln_1(x)), C, 2);             // 3 x (B, n, C)
    auto heads = [&](const Tensor& t) { return t.reshape({B, n, nh, hd}).transpose(1, 2); };  // (B, nh, n, hd)
    Tensor q = heads(qkv[0]), k = contiguous(heads(qkv[1])), v = contiguous(heads(qkv[2]));
    if (p > 0) {
      k = cat({cache.k[l], k}, 2);
      v = cat({cache.v[l], v}, 2);
    }
    cache.k[l] = k;
    cache.v[l] = v;
    Tensor att = matmul(q * scale, k.transpose(-2, -1));  // (B, nh, n, p + n)
    if (future.defined()) att = att + future;
    att = softmax(att, -1);
    Tensor y = matmul(att, v).transpose(1, 2).reshape({B, n, C});
    auto [hx, y2] = b.ln_2.forward_residual(x, b.attn.c_proj(y));
    Tensor mlp = b.mlp(y2);
    if (fused) {
      AddLayerNormOutput o = (l + 1 < h.size() ? h[l + 1]->ln_1 : ln_f).forward_residual(hx, mlp);
      x = o.h;
      normed = o.y;
    } else {
      x = hx + mlp;
    }
  }
  cache.length = p + n;
  return linear(normed.defined() ? normed : ln_f(x), wte.weight);
}

Tensor GPT2::sample_next(const Tensor& logits, double temperature, int64_t top_k, Generator& gen) const {
  // logits (B, V) -> (B, 1) int64
  if (temperature <= 0.0) return argmax(logits, 1, true).to(DType::I64);
  Tensor l = logits.to(DType::F32) * (1.0 / temperature);
  if (top_k > 0 && top_k < l.size(1)) {
    Tensor kth = narrow(topk(l, top_k, 1).values, 1, top_k - 1, 1);  // (B, 1): the k-th largest
    l = masked_fill(l, lt(l, kth), -INFINITY);
  }
  return multinomial(softmax(l, 1), 1, false, &gen).to(DType::I64);
}

Tensor GPT2::generate(const Tensor& idx, int64_t max_new_tokens, double temperature, int64_t top_k, Generator& gen) {
  BRISK_CHECK(idx.dim() == 2 && idx.size(1) >= 1, "GPT2::generate: expected a prompt (B, T) of at least one token, ",
              "got shape ", idx.sizes());
  BRISK_CHECK(max_new_tokens >= 0, "GPT2::generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  BRISK_CHECK(temperature >= 0.0 && std::isfinite(temperature), "GPT2::generate: temperature must be >= 0, got ",
              temperature);
  NoGradGuard no_grad;
  struct EvalMode {  // eval mode while generating; the caller's mode back afterwards, also on an error
    nn::Module& m;
    bool was_training;
    explicit EvalMode(nn::Module& module) : m(module), was_training(module.is_training()) { m.eval(); }
    ~EvalMode() { m.train(was_training); }
  } eval_mode(*this);
  Tensor seq = idx.to(DType::I64);
  KVCache cache;
  const int64_t T = config.block_size;
  Tensor logits;  // of the last position, (B, V)
  auto prime = [&]() {
    cache.clear();
    const int64_t len = seq.size(1), from = len > T ? len - T : 0;
    Tensor all = forward_cached(contiguous(narrow(seq, 1, from, len - from)), cache);
    logits = narrow(all, 1, all.size(1) - 1, 1).squeeze(1);
  };
  if (max_new_tokens > 0) prime();
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    Tensor next = sample_next(logits, temperature, top_k, gen);
    seq = cat({seq, next}, 1);
    if (i + 1 == max_new_tokens) break;
    if (cache.length < T) {
      logits = forward_cached(next, cache).squeeze(1);
    } else {
      prime();  // the context is full: the last block_size tokens, recomputed
    }
  }
  return seq;
}

}  // namespace brisk::models
