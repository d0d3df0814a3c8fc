// The peer of bench/gpt_bench.cpp: the same small GPT trained in libtorch (Debian's libtorch-dev),
// layer for layer as brisk's nn::TransformerBlock: token + learned position embeddings, 6
// pre-LayerNorm blocks (causal attention written out as brisk's is: Q K^T / sqrt(hd), masked_fill
// of the future with -inf, softmax, att V; 4x GELU(tanh) MLP; biases), a final LayerNorm and an
// output head tied to the token embedding; width 384, 6 heads, context 256, byte vocabulary,
// dropout 0, fp32. AdamW lr 3e-4, betas (0.9, 0.95), weight decay 0.1 on parameters with
// dim >= 2 only; no clipping; random tokens, targets = inputs shifted; nanoGPT's init.
// FLOPs per step: per token 6 * N + 12 * L * T * d (N: every parameter but the position
// embedding), times B * T tokens; the formula is explained in bench/gpt_bench.cpp.
// Usage: libtorch_gpt [--steps N] [--threads T] [--batch-size B] [--allow-reference-blas] [--profile FILE]
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "libtorch_common.h"

namespace {

constexpr int64_t kLayers = 6, kHeads = 6, kWidth = 384, kContext = 256, kVocab = 256;
constexpr int kWarmup = 2;

struct Block : torch::nn::Module {
  torch::nn::LayerNorm ln_1{torch::nn::LayerNormOptions({kWidth})}, ln_2{torch::nn::LayerNormOptions({kWidth})};
  torch::nn::Linear attn_c_attn{kWidth, 3 * kWidth}, attn_c_proj{kWidth, kWidth};
  torch::nn::Linear c_fc{kWidth, 4 * kWidth}, c_proj{4 * kWidth, kWidth};
  Block() {
    register_module("ln_1", ln_1);
    register_module("attn_c_attn", attn_c_attn);
    register_module("attn_c_proj", attn_c_proj);
    register_module("ln_2", ln_2);
    register_module("c_fc", c_fc);
    register_module("c_proj", c_proj);
  }
  torch::Tensor attention(const torch::Tensor& x, const torch::Tensor& future) {
    const int64_t B = x.size(0), T = x.size(1), hd = kWidth / kHeads;
    auto qkv = attn_c_attn(x).split(kWidth, 2);
    auto heads = [&](const torch::Tensor& t) { return t.view({B, T, kHeads, hd}).transpose(1, 2); };
    auto q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
    att = torch::softmax(att.masked_fill(future, -std::numeric_limits<float>::infinity()), -1);
    auto y = torch::matmul(att, v).transpose(1, 2).reshape({B, T, kWidth});
    return attn_c_proj(y);
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& future) {
    auto h = x + attention(ln_1(x), future);
    return h + c_proj(torch::gelu(c_fc(ln_2(h)), "tanh"));
  }
};

struct GPT : torch::nn::Module {
  torch::nn::Embedding wte{kVocab, kWidth}, wpe{kContext, kWidth};
  std::vector<std::shared_ptr<Block>> blocks;
  torch::nn::LayerNorm ln_f{torch::nn::LayerNormOptions({kWidth})};
  GPT() {
    register_module("wte", wte);
    register_module("wpe", wpe);
    for (int64_t l = 0; l < kLayers; ++l)
      blocks.push_back(register_module("h" + std::to_string(l), std::make_shared<Block>()));
    register_module("ln_f", ln_f);
    torch::NoGradGuard no_grad;
    for (auto& np : named_parameters()) {
      const std::string& name = np.key();
      torch::Tensor p = np.value();
      const bool residual_proj = name.size() >= 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0;
      if (name.find("ln_") != std::string::npos) continue;
      if (p.dim() >= 2) {
        torch::nn::init::normal_(p, 0.0, residual_proj ? 0.02 / std::sqrt(2.0 * kLayers) : 0.02);
      } else {
        torch::nn::init::zeros_(p);
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    const int64_t T = idx.size(1);
    auto future = torch::ones({T, T}, torch::kBool).triu(1);
    auto x = wte(idx) + wpe(torch::arange(T, torch::kLong));
    for (auto& b : blocks) x = b->forward(x, future);
    return torch::nn::functional::linear(ln_f(x), wte->weight);  // tied head
  }
};

}  // namespace

static int run(int argc, char** argv) {
  const char* usage =
      "usage: libtorch_gpt [--steps N] [--threads T] [--batch-size B] [--allow-reference-blas] [--profile FILE]\n"
      "Times N training steps (default 5, after 2 warm-up steps whose losses are printed) of a small GPT (6 layers,\n"
      "6 heads, width 384, context 256, byte vocabulary, batch B, default 8) in libtorch with AdamW on random\n"
      "tokens, on T threads (default 1) for libtorch and OpenBLAS; prints tokens/s, the training FLOPs per step\n"
      "and GFLOP/s. Refuses to run unless libtorch's BLAS is OpenBLAS (--allow-reference-blas: run anyway).\n"
      "--profile FILE: write a Chrome trace of the timed steps (torch's profiler; slows them).\n";
  peer::Args a;
  a.steps = 5;
  a.batch = 8;
  if (int rc = peer::parse_args("libtorch_gpt", usage, argc, argv, &a); rc >= 0) return rc;
  if (int rc = peer::setup("libtorch_gpt", a); rc >= 0) return rc;
  const int64_t batch = a.batch, T = kContext;
  torch::manual_seed(0);
  GPT model;
  std::vector<torch::Tensor> decay, no_decay;
  int64_t n_params = 0;
  for (const auto& t : model.parameters()) {
    (t.dim() >= 2 ? decay : no_decay).push_back(t);
    n_params += t.numel();
  }
  using torch::optim::AdamWOptions;
  auto options = [](double wd) {
    return std::make_unique<AdamWOptions>(AdamWOptions(3e-4).betas({0.9, 0.95}).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(0.1));
  groups.emplace_back(no_decay, options(0.0));
  torch::optim::AdamW opt(std::move(groups), AdamWOptions(3e-4).betas({0.9, 0.95}).weight_decay(0.1));

  const int64_t n_matmul = n_params - model.wpe->weight.numel();
  const double flops_per_token = 6.0 * static_cast<double>(n_matmul) + 12.0 * kLayers * T * kWidth;
  const double flops_per_step = flops_per_token * static_cast<double>(batch * T);
  std::printf("libtorch %s gpt: %lld parameters (%lld in matrix products), %d thread(s), batch %lld x %lld tokens\n",
              TORCH_VERSION, static_cast<long long>(n_params), static_cast<long long>(n_matmul), a.threads,
              static_cast<long long>(batch), static_cast<long long>(T));
  std::printf("training FLOPs per step: %.2f GFLOP (6 * %lld + 12 * %lld * %lld * %lld per token)\n",
              flops_per_step * 1e-9, static_cast<long long>(n_matmul), static_cast<long long>(kLayers),
              static_cast<long long>(T), static_cast<long long>(kWidth));
  std::fflush(stdout);

  auto step = [&] {
    auto data = torch::randint(0, kVocab, {batch, T + 1}, torch::kLong);
    auto x = data.narrow(1, 0, T).contiguous(), y = data.narrow(1, 1, T).contiguous();
    auto logits = model.forward(x);
    auto loss = torch::nn::functional::cross_entropy(logits.reshape({batch * T, kVocab}), y.reshape({batch * T}));
    loss.backward();
    opt.step();
    peer::zero_grad_to_none(opt);
    return loss.item<double>();
  };
  for (int i = 0; i < kWarmup; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    const double loss = step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("warm-up step %d: loss %.4f (%.2f s)\n", i + 1, loss, s);
    std::fflush(stdout);
  }
  double last = 0;
  auto profile = peer::maybe_profile(a);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.steps; ++i) last = step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile.reset();  // writes the trace
  std::printf("last loss %.4f; %d steps in %.2f s\n", last, a.steps, s);
  std::printf("libtorch: tokens/s: %.0f; GFLOP/s: %.1f\n", static_cast<double>(a.steps * batch * T) / s,
              flops_per_step * a.steps / s * 1e-9);
  return 0;
}

int main(int argc, char** argv) {
  return peer::guarded_main("libtorch_gpt", run, argc, argv);
}
