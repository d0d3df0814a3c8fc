// GPT-2: presets and their parameter counts, shapes, the tied head, GPT-2's init, the AdamW
// groups, cached generation against recomputing the prefix, a float64 gradient check, and the
// residual adds fused with the LayerNorms after them, and each MLP run as one gelu_mlp op, against
// the unfused composition.
#include <gtest/gtest.h>

#include <brisk/amp/autocast.h>
#include <brisk/brisk.h>

#include <cmath>
#include <optional>

#include "common/gradcheck.h"

using namespace brisk;
using models::GPT2;
using models::GPT2Config;

namespace {

GPT2Config micro() {
  GPT2Config c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.block_size = 6, c.vocab_size = 7;
  return c;
}

// Mean and standard deviation of a tensor's values.
std::pair<double, double> stats(const Tensor& t) {
  Tensor d = t.detach().to(DType::F64);
  const double m = mean(d).item<double>();
  const double s = std::sqrt(mean((d - m) * (d - m)).item<double>());
  return {m, s};
}

bool equal(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && sum(eq(a, b)).item<int64_t>() == a.numel();
}

// Token indices and targets (B, T) for c's vocabulary, both from one generator seeded with seed.
std::pair<Tensor, Tensor> random_batch(const GPT2Config& c, int64_t B, int64_t T, uint64_t seed) {
  Generator gen(seed);
  Tensor idx = randint(0, c.vocab_size, {B, T}, {.dtype = DType::I64}, &gen);
  return {idx, randint(0, c.vocab_size, {B, T}, {.dtype = DType::I64}, &gen)};
}

}  // namespace

TEST(GPT2Config, PresetsHaveTheirShapes) {
  GPT2Config t = GPT2Config::preset("tiny");
  EXPECT_EQ(t.n_layer, 2);
  EXPECT_EQ(t.vocab_size, 256);
  GPT2Config s = GPT2Config::preset("small");
  EXPECT_EQ(std::vector<int64_t>({s.n_layer, s.n_head, s.n_embd, s.block_size, s.vocab_size}),
            std::vector<int64_t>({6, 6, 384, 256, 256}));
  GPT2Config g = GPT2Config::preset("124M");
  EXPECT_EQ(std::vector<int64_t>({g.n_layer, g.n_head, g.n_embd, g.block_size, g.vocab_size}),
            std::vector<int64_t>({12, 12, 768, 1024, 50304}));
  GPT2Config m = GPT2Config::preset("350M");
  EXPECT_EQ(std::vector<int64_t>({m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size}),
            std::vector<int64_t>({24, 16, 1024, 1024, 50304}));
}

TEST(GPT2Config, UnknownPresetListsTheValidOnes) {
  try {
    GPT2Config::preset("huge");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'huge'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tiny, small, 124M, 350M"), std::string::npos) << msg;
  }
}

TEST(GPT2Config, BadShapesAreErrors) {
  GPT2Config c = micro();
  c.n_embd = 9;  // not divisible by 2 heads
  EXPECT_THROW(GPT2 m(c), Error);
  c = micro();
  c.block_size = 0;
  EXPECT_THROW(GPT2 m(c), Error);
  c = micro();
  c.dropout = 1.0;
  EXPECT_THROW(GPT2 m(c), Error);
  c = micro();
  c.bias = false;
  EXPECT_THROW(GPT2 m(c), Error);
}

// nanoGPT's count (get_num_params(non_embedding=False)) of GPT-2 124M with the padded vocabulary:
// 124,475,904; 350M the same way. The formula is checked against real models for tiny and small.
TEST(GPT2Config, ParameterCountsMatchNanoGPT) {
  EXPECT_EQ(GPT2Config::preset("124M").num_parameters(), 124475904);
  EXPECT_EQ(GPT2Config::preset("350M").num_parameters(), 354871296);
  for (const char* name : {"tiny", "small"}) {
    GPT2 m(GPT2Config::preset(name));
    EXPECT_EQ(m.num_parameters(), m.config.num_parameters()) << name;
  }
  EXPECT_EQ(GPT2(GPT2Config::preset("tiny")).num_parameters(), 2 * (12 * 64 * 64 + 13 * 64) + 256 * 64 + 64 * 64 + 128);
}

TEST(GPT2, ShapesAndBadInputs) {
  manual_seed(0);
  GPT2 m(micro());
  Tensor idx = randint(0, 7, {3, 5});
  EXPECT_EQ(m(idx).sizes(), (Shape{3, 5, 7}));
  EXPECT_EQ(m(idx.to(DType::I32)).sizes(), (Shape{3, 5, 7}));
  EXPECT_THROW(m(randint(0, 7, {3, 7})), Error);  // longer than block_size 6
  EXPECT_THROW(m(randint(0, 7, {5})), Error);
  EXPECT_THROW(m(randn({3, 5})), Error);
  Tensor loss = GPT2::loss(m(idx), randint(0, 7, {3, 5}));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_THROW(GPT2::loss(m(idx), randint(0, 7, {3, 4})), Error);
}

TEST(GPT2, NamesFollowNanoGPT) {
  GPT2 m(micro());
  std::vector<std::string> names;
  for (auto& [n, p] : m.named_parameters()) names.push_back(n);
  ASSERT_EQ(names.size(), 2u + 2 * 12 + 2);
  EXPECT_EQ(names[0], "wte.weight");
  EXPECT_EQ(names[1], "wpe.weight");
  EXPECT_EQ(names[2], "h0.ln_1.weight");
  EXPECT_EQ(names.back(), "ln_f.bias");
}

TEST(GPT2, HeadIsTiedToTheTokenEmbedding) {
  manual_seed(1);
  GPT2 m(micro());
  // One tensor: the head reads wte.weight; it is listed once.
  int64_t count = 0;
  for (const Tensor& p : m.parameters()) count += p.is_same(m.wte.weight) ? 1 : 0;
  EXPECT_EQ(count, 1);
  // Its gradient has both uses: the lookup (only rows of tokens in the input) and the head (every row).
  Tensor idx = tensor<int64_t>({0, 1}).view({1, 2});
  GPT2::loss(m(idx), tensor<int64_t>({1, 2}).view({1, 2})).backward();
  Tensor g = m.wte.weight.grad();
  ASSERT_TRUE(g.defined());
  // Row 5 never appears in the input: its gradient comes from the head alone, and is non-zero.
  EXPECT_GT(sum(abs(g.select(0, 5))).item<double>(), 0.0);
  // Compare with the sum of the two uses computed separately on an untied copy.
  Tensor w_embed = m.wte.weight.detach().clone().requires_grad_(true);
  Tensor w_head = m.wte.weight.detach().clone().requires_grad_(true);
  Tensor x = embedding(idx, w_embed) + m.wpe(arange(2));
  for (auto& b : m.h) x = (*b)(x);
  GPT2::loss(linear(m.ln_f(x), w_head), tensor<int64_t>({1, 2}).view({1, 2})).backward();
  Tensor both = w_embed.grad() + w_head.grad();
  EXPECT_LT(max(abs(both - g)).item<double>(), 1e-6);
  EXPECT_GT(sum(abs(w_embed.grad())).item<double>(), 0.0);
}

TEST(GPT2, InitialisationIsGPT2s) {
  manual_seed(3);
  GPT2Config c = GPT2Config::preset("tiny");
  c.n_layer = 6;  // residual projections at 0.02 / sqrt(12); matrices of 4,096 values and more
  GPT2 m(c);
  const double resid = 0.02 / std::sqrt(12.0);
  for (auto& [name, p] : m.named_parameters()) {
    auto [mu, sd] = stats(p);
    if (name.find("ln_") != std::string::npos) {
      const bool weight = name.find("weight") != std::string::npos;
      EXPECT_EQ(mu, weight ? 1.0 : 0.0) << name;
      EXPECT_EQ(sd, 0.0) << name;
    } else if (p.dim() == 1) {
      EXPECT_EQ(sd, 0.0) << name;
      EXPECT_EQ(mu, 0.0) << name;
    } else {
      const double want = name.size() >= 13 && name.substr(name.size() - 13) == "c_proj.weight" ? resid : 0.02;
      EXPECT_NEAR(sd, want, 0.05 * want) << name;
      EXPECT_NEAR(mu, 0.0, 0.1 * want) << name;  // 6 standard errors for 4,096 values
    }
  }
  // The first loss of an untrained model is about ln(vocab): the logits are near zero.
  Tensor idx = randint(0, 256, {2, 32});
  EXPECT_NEAR(GPT2::loss(m(idx), randint(0, 256, {2, 32})).item<double>(), std::log(256.0), 0.1);
}

TEST(GPT2, ParamGroupsDecayOnlyMatrices) {
  GPT2 m(micro());
  auto groups = m.param_groups({.lr = 1e-3, .weight_decay = 0.1});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].options.weight_decay, 0.1);
  EXPECT_EQ(groups[1].options.weight_decay, 0.0);
  EXPECT_EQ(groups[1].options.lr, 1e-3);
  int64_t n = 0;
  for (const Tensor& p : groups[0].params) {
    EXPECT_GE(p.dim(), 2);
    n += p.numel();
  }
  for (const Tensor& p : groups[1].params) {
    EXPECT_EQ(p.dim(), 1);
    n += p.numel();
  }
  EXPECT_EQ(n, m.num_parameters());
  // 2 embeddings + 4 matrices per layer; 2 LayerNorms x 2 + 4 biases per layer, + ln_f.
  EXPECT_EQ(groups[0].params.size(), 2u + 4 * 2);
  EXPECT_EQ(groups[1].params.size(), 8u * 2 + 2);
  optim::AdamW opt(groups);  // accepted by the optimizer as they are
}

TEST(GPT2, CachedLogitsMatchRecomputingThePrefix) {
  manual_seed(4);
  GPT2 m(GPT2Config::preset("tiny"));
  m.eval();
  const int64_t B = 2, T = 40;
  Tensor idx = randint(0, 256, {B, T});
  Tensor full_logits;
  {
    NoGradGuard g;
    full_logits = m(idx);  // (B, T, V)
  }
  // A prompt of 5 in one call, then one token at a time.
  models::KVCache cache;
  Tensor first = m.forward_cached(contiguous(narrow(idx, 1, 0, 5)), cache);
  EXPECT_EQ(cache.length, 5);
  double worst = max(abs(first - narrow(full_logits, 1, 0, 5))).item<double>();
  for (int64_t t = 5; t < T; ++t) {
    Tensor l = m.forward_cached(contiguous(narrow(idx, 1, t, 1)), cache);
    ASSERT_EQ(l.sizes(), (Shape{B, 1, 256}));
    worst = std::max(worst, max(abs(l - narrow(full_logits, 1, t, 1))).item<double>());
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_FALSE(first.requires_grad());
  // Past the context: an error naming block_size.
  models::KVCache c2;
  m.forward_cached(randint(0, 256, {1, 64}), c2);
  EXPECT_THROW(m.forward_cached(randint(0, 256, {1, 1}), c2), Error);
}

// Greedy generation with the cache gives the tokens of the uncached loop (recompute the cropped
// prefix, take the argmax), also past block_size, where the context is cropped as nanoGPT does.
TEST(GPT2, GreedyGenerationMatchesTheUncachedLoop) {
  manual_seed(5);
  GPT2Config c = GPT2Config::preset("tiny");
  c.block_size = 16;
  GPT2 m(c);
  // A trained-looking model: larger weights so the argmax is not decided by rounding.
  for (const Tensor& p : m.parameters()) {
    NoGradGuard g;
    if (p.dim() >= 2) nn::init::normal_(p, 0.0, 0.3);
  }
  Tensor prompt = randint(0, 256, {2, 3});
  Generator gen(7);
  Tensor got = m.generate(prompt, 25, 0.0, 0, gen);
  ASSERT_EQ(got.sizes(), (Shape{2, 28}));
  EXPECT_TRUE(m.is_training());  // the mode is restored
  Tensor seq = prompt;
  {
    NoGradGuard g;
    m.eval();
    for (int i = 0; i < 25; ++i) {
      const int64_t len = seq.size(1), from = std::max<int64_t>(0, len - 16);
      Tensor logits = m(contiguous(narrow(seq, 1, from, len - from)));
      Tensor next = argmax(narrow(logits, 1, logits.size(1) - 1, 1).squeeze(1), 1, true).to(DType::I64);
      seq = cat({seq, next}, 1);
    }
  }
  EXPECT_TRUE(equal(got, seq)) << "cached and uncached greedy tokens differ";
}

TEST(GPT2, SamplingIsSeededAndTopKRestricts) {
  manual_seed(6);
  GPT2 m(micro());
  Tensor prompt = zeros({3, 1}, {.dtype = DType::I64});
  Generator g1(11), g2(11);
  Tensor a = m.generate(prompt, 10, 1.0, 0, g1), b = m.generate(prompt, 10, 1.0, 0, g2);
  EXPECT_TRUE(equal(a, b));
  EXPECT_GE(min(a).item<int64_t>(), 0);
  EXPECT_LT(max(a).item<int64_t>(), 7);
  // top_k = 1 is greedy whatever the temperature.
  Generator g3(12), g4(13);
  EXPECT_TRUE(equal(m.generate(prompt, 8, 2.0, 1, g3), m.generate(prompt, 8, 0.0, 0, g4)));
  EXPECT_THROW(m.generate(prompt, -1, 1.0, 0, g1), Error);
  EXPECT_THROW(m.generate(prompt, 1, -1.0, 0, g1), Error);
}

TEST(GPT2, GradientsPassAFloat64Check) {
  set_default_dtype(DType::F64);
  manual_seed(8);
  GPT2 m(micro());
  set_default_dtype(DType::F32);
  // Larger weights than GPT-2's init, so every path contributes measurably.
  for (const Tensor& p : m.parameters()) {
    NoGradGuard g;
    nn::init::normal_(p, 0.0, 0.5);
  }
  Tensor idx = randint(0, 7, {2, 5}), targets = randint(0, 7, {2, 5});
  std::vector<Tensor> params = m.parameters();
  for (const Tensor& p : params) ASSERT_EQ(p.dtype(), DType::F64);
  brisk::testing::expect_gradcheck([&](const std::vector<Tensor>&) { return GPT2::loss(m(idx), targets); }, params,
                                   "GPT2 loss");
}

// activation_checkpointing recomputes each block in backward: the same loss and gradients bit for
// bit (dropout included: the recomputation replays the generator), with a lower peak of
// activation memory over the forward and backward of a deeper model.
TEST(GPT2, ActivationCheckpointingGivesTheSameGradientsWithLessMemory) {
  GPT2Config c = micro();
  c.n_layer = 6, c.n_embd = 32, c.block_size = 32, c.vocab_size = 50, c.dropout = 0.1;
  const std::pair<Tensor, Tensor> batch = random_batch(c, 4, 32, 3);
  const Tensor &idx = batch.first, &targets = batch.second;
  auto run = [&](bool checkpointing, std::vector<Tensor>& grads) {
    GPT2Config cc = c;
    cc.activation_checkpointing = checkpointing;
    manual_seed(11);
    GPT2 model(cc);
    model.train();
    manual_seed(12);  // the dropout masks
    const int64_t before = memory_stats().current[static_cast<int>(MemoryCategory::Other)];
    reset_peak_memory_stats();
    Tensor loss = GPT2::loss(model(idx), targets);
    loss.backward();
    const int64_t peak = memory_stats().peak[static_cast<int>(MemoryCategory::Other)] - before;
    for (const Tensor& p : model.parameters()) grads.push_back(p.grad().clone());
    return std::pair<double, int64_t>{loss.item<double>(), peak};
  };
  std::vector<Tensor> plain_grads, ckpt_grads;
  const auto [plain_loss, plain_peak] = run(false, plain_grads);
  const auto [ckpt_loss, ckpt_peak] = run(true, ckpt_grads);
  EXPECT_EQ(plain_loss, ckpt_loss);
  ASSERT_EQ(plain_grads.size(), ckpt_grads.size());
  for (size_t i = 0; i < plain_grads.size(); ++i) EXPECT_TRUE(equal(plain_grads[i], ckpt_grads[i])) << i;
  EXPECT_LT(ckpt_peak, plain_peak * 3 / 4)
      << "peak bytes " << ckpt_peak << " with checkpointing, " << plain_peak << " without";
}

namespace {

// GPT-2's forward written out with separate residual adds and LayerNorms (no dropout) and the MLP
// as linear, gelu, linear, as the model computed it before the adds were fused with the norms after
// them and the MLP became one op.
Tensor unfused_forward(GPT2& m, const Tensor& idx) {
  Tensor x = m.wte(idx) + m.wpe(arange(idx.size(1), {.dtype = DType::I64}));
  for (auto& b : m.h) {
    Tensor hx = x + b->attn(b->ln_1(x));
    x = hx + b->c_proj(gelu(b->c_fc(b->ln_2(hx)), GeluApproximation::Tanh));
  }
  return linear(m.ln_f(x), m.wte.weight);
}

}  // namespace

TEST(GPT2, FusedResidualNormsGiveTheUnfusedLogitsAndGradients) {
  GPT2Config c = micro();
  c.n_layer = 3, c.n_embd = 24, c.n_head = 3, c.block_size = 8, c.vocab_size = 11;
  const std::pair<Tensor, Tensor> batch = random_batch(c, 2, 8, 5);
  const Tensor &idx = batch.first, &targets = batch.second;
  // f32, a bf16 model, and f32 under bf16 autocast (a bf16 branch added to the f32 stream); the
  // model as is (fused across blocks), and with a hook on a block (each block on its own).
  for (int mode = 0; mode < 4; ++mode) {
    manual_seed(7);
    GPT2 model(c);
    if (mode == 1) model.to(DType::BF16);
    if (mode == 3) model.h[1]->register_forward_hook([](nn::Module&, const Tensor&, const Tensor&) {});
    std::vector<Tensor> logits(2);
    std::vector<std::vector<Tensor>> grads(2);
    for (int fused = 0; fused < 2; ++fused) {
      std::optional<amp::Autocast> ac;
      if (mode == 2) ac.emplace(DType::BF16);
      model.zero_grad();
      logits[fused] = fused ? model(idx) : unfused_forward(model, idx);
      GPT2::loss(logits[fused].to(DType::F32), targets).backward();
      for (const Tensor& p : model.parameters()) grads[fused].push_back(p.grad().clone());
    }
    EXPECT_TRUE(equal(logits[0], logits[1])) << "mode " << mode;
    ASSERT_EQ(grads[0].size(), grads[1].size());
    for (size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_TRUE(equal(grads[0][i], grads[1][i])) << "mode " << mode << " " << i;
  }
  // Cached generation takes the fused path too: its logits are the uncached forward's.
  manual_seed(7);
  GPT2 model(c);
  models::KVCache cache;
  EXPECT_TRUE(equal(model.forward_cached(idx, cache), unfused_forward(model, idx)));
}
