// gpt_bench: training speed of a small GPT in brisk, the peer of bench/libtorch_gpt.cpp (the same
// model, optimizer and data in libtorch; bench/compare_gpt.sh runs both). GPT-2 layout as nanoGPT:
// token + learned position embeddings, 6 pre-LayerNorm nn::TransformerBlocks (causal attention,
// 6 heads, 4x GELU(tanh) MLP, biases), a final LayerNorm and an output head tied to the token
// embedding; width 384, context 256, byte vocabulary (256), dropout 0, fp32. AdamW lr 3e-4, betas
// (0.9, 0.95), weight decay 0.1 on every parameter with dim >= 2 (the linear weights and both
// embeddings, as nanoGPT), none on biases and LayerNorms; no clipping. Random tokens, targets =
// inputs shifted by one. Init as nanoGPT: weights and embeddings N(0, 0.02), the residual
// projections N(0, 0.02 / sqrt(2 * layers)), biases 0, so the first loss is near ln 256 = 5.55.
//
// Training FLOPs per step (the usual estimate, as nanoGPT's estimate_mfu and the PaLM paper):
//   per token 6 * N + 12 * L * T * d, tokens per step B * T,
// N = parameters that take part in matrix products = all but the position embedding (the token
// embedding counts: it is the output head's weight, a 2 * V * d product per token forward);
// 6 = 2 (multiply-add) x 3 (forward, input gradient, weight gradient); 12 * L * T * d = the two
// attention products (Q K^T and att V), each 2 * T * d per token and layer, times 3, counted over
// the full T x T square (as the estimate does; causal masking makes half of it useless work).
// The model is models::GPT2 with the "small" preset (models/include/brisk/models/gpt2.h).
// Usage: gpt_bench [--steps N] [--warmup W] [--threads T] [--batch-size B]
#include <brisk/brisk.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

using namespace brisk;

int main(int argc, char** argv) {
  int64_t steps = 5, warmup = 2, batch = 8;
  int threads = 1;
  cli::Parser p("gpt_bench",
                "Times N training steps (after W warm-up steps, whose losses are printed) of a small GPT (6 layers,\n"
                "6 heads, width 384, context 256, byte vocabulary, batch B) in brisk, with AdamW, on random tokens;\n"
                "prints tokens/s, the training FLOPs per step and GFLOP/s. The peer is bench/libtorch_gpt.");
  p.add("steps", "timed training steps", &steps);
  p.add("warmup", "untimed steps first", &warmup);
  p.add("threads", "CPU threads", &threads);
  p.add("batch_size", "sequences per step", &batch);
  if (!p.parse(argc, argv)) return p.exit_code();
  if (steps < 1 || warmup < 0 || threads < 1 || batch < 1) {
    std::fprintf(stderr, "gpt_bench: --steps, --threads and --batch-size must be positive, --warmup >= 0\n");
    return 2;
  }
  try {
    set_num_threads(threads);
    manual_seed(0);
    models::GPT2 model(models::GPT2Config::preset("small"));  // the GPT described above
    const models::GPT2Config& cfg = model.config;
    const int64_t n_params = model.num_parameters();
    optim::AdamW opt(model.param_groups({.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1}));

    const int64_t T = cfg.block_size;
    const int64_t n_matmul = n_params - model.wpe.weight.numel();
    const double flops_per_token = 6.0 * static_cast<double>(n_matmul) + 12.0 * cfg.n_layer * T * cfg.n_embd;
    const double flops_per_step = flops_per_token * static_cast<double>(batch * T);
    std::printf("brisk gpt: %lld parameters (%lld in matrix products), %d thread(s), batch %lld x %lld tokens\n",
                static_cast<long long>(n_params), static_cast<long long>(n_matmul), get_num_threads(),
                static_cast<long long>(batch), static_cast<long long>(T));
    std::printf("training FLOPs per step: %.2f GFLOP (6 * %lld + 12 * %lld * %lld * %lld per token)\n",
                flops_per_step * 1e-9, static_cast<long long>(n_matmul), static_cast<long long>(cfg.n_layer),
                static_cast<long long>(T), static_cast<long long>(cfg.n_embd));
    std::fflush(stdout);

    auto step = [&]() {
      Tensor data = randint(0, cfg.vocab_size, {batch, T + 1});
      Tensor x = contiguous(narrow(data, 1, 0, T)), y = contiguous(narrow(data, 1, 1, T));
      Tensor loss = models::GPT2::loss(model(x), y);
      loss.backward();
      opt.step();
      opt.zero_grad();
      return loss.item<double>();
    };
    for (int64_t i = 0; i < warmup; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      const double loss = step();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("warm-up step %lld: loss %.4f (%.2f s)\n", static_cast<long long>(i) + 1, loss, s);
      std::fflush(stdout);
    }
    double last = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < steps; ++i) last = step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("last loss %.4f; %lld steps in %.2f s\n", last, static_cast<long long>(steps), s);
    std::printf("brisk: tokens/s: %.0f; GFLOP/s: %.1f\n", static_cast<double>(steps * batch * T) / s,
                flops_per_step * static_cast<double>(steps) / s * 1e-9);
  } catch (const Error& e) {
    std::fprintf(stderr, "gpt_bench: %s\n", e.what());
    return 1;
  }
}
