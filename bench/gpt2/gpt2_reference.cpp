// gpt2_reference: writes what an independent implementation needs to check brisk's GPT-2 against
// it, and brisk's own results on it (bench/gpt2/torch_gpt2.py `check` reads the folder and compares
// with PyTorch; docs/gpt2.md "Checked against PyTorch"):
//
//   DIR/config.json        the model and run configuration (preset, batch, sequence, optimizer, dtype)
//   DIR/model.safetensors  the initial weights (brisk's parameter names, f32)
//   DIR/batch.safetensors  "idx" and "targets", (B, T) int64: random tokens, targets = idx shifted by one
//   DIR/brisk.safetensors  "loss" (the first forward's mean cross entropy), "logits" (B, T, V) f32,
//                          "grad.<name>" for every parameter, "losses" (steps) f64: the loss before
//                          each of `steps` AdamW steps on the same batch (llm.c's test_gpt2 does this)
//
//   gpt2_reference --out /tmp/ref --preset 124M --batch 4 --seq 64 --device cuda --mixed_precision no
#include <brisk/brisk.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace brisk;

int main(int argc, char** argv) {
  std::string out, preset = "124M", device_s = "cpu", mp = "no";
  int64_t batch = 4, seq = 64, steps = 10, seed = 0;
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
  cli::Parser p("gpt2_reference",
                "Writes GPT-2's initial weights, a batch, and brisk's loss, logits, gradients and the losses of\n"
                "--steps AdamW steps into --out, for bench/gpt2/torch_gpt2.py to compare with PyTorch.");
  p.add("out", "folder to write (created)", &out);
  p.add("preset", "model preset: tiny, small, 124M, 350M", &preset);
  p.add("batch", "sequences per batch", &batch);
  p.add("seq", "tokens per sequence (at most the preset's context)", &seq);
  p.add("steps", "AdamW steps on the batch (their losses are recorded)", &steps);
  p.add("device", "cpu or cuda", &device_s);
  p.add("mixed_precision", "no or bf16 (autocast around the forward)", &mp);
  p.add("seed", "seed of the weights and the batch", &seed);
  p.add("lr", "AdamW learning rate", &lr);
  p.add("weight_decay", "AdamW weight decay on the 2-D weights (none on biases and LayerNorms)", &wd);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    BRISK_CHECK(!out.empty(), "gpt2_reference: --out is required");
    BRISK_CHECK(mp == "no" || mp == "bf16", "gpt2_reference: --mixed_precision must be no or bf16, got '", mp, "'");
    BRISK_CHECK(batch > 0 && seq > 0 && steps > 0, "gpt2_reference: --batch, --seq and --steps must be positive");
    const Device device = Device::parse(device_s);
    manual_seed(static_cast<uint64_t>(seed));
    models::GPT2 model(models::GPT2Config::preset(preset));
    const models::GPT2Config& cfg = model.config;
    BRISK_CHECK(seq <= cfg.block_size, "gpt2_reference: --seq ", seq, " is longer than the preset's context ",
                cfg.block_size);
    std::filesystem::create_directories(out);
    data::save_safetensors(out + "/model.safetensors", model);

    // Tokens below GPT-2's real vocabulary (50257; the padded rows are never a target).
    Generator gen(static_cast<uint64_t>(seed) + 1);
    const int64_t vocab = std::min<int64_t>(cfg.vocab_size, 50257);
    Tensor tokens = randint(0, vocab, {batch, seq + 1}, {.dtype = DType::I64}, &gen);
    Tensor idx = contiguous(tokens.narrow(1, 0, seq)), targets = contiguous(tokens.narrow(1, 1, seq));
    data::save_safetensors(out + "/batch.safetensors", {{"idx", idx}, {"targets", targets}});

    model.to(device);
    optim::AdamW opt(model.param_groups({.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = wd}));
    const Tensor x = idx.to(device), y = targets.to(device);
    data::NamedTensors results;
    std::vector<double> losses;
    for (int64_t s = 0; s < steps; ++s) {
      Tensor logits, loss;
      {
        amp::Autocast ac(DType::BF16, mp == "bf16");
        logits = model(x);
        loss = models::GPT2::loss(logits, y);
      }
      loss.backward();
      losses.push_back(loss.item<double>());
      if (s == 0) {
        results.emplace_back("loss", loss.detach().to(DType::F32).to(kCPU).reshape({1}));
        results.emplace_back("logits", logits.detach().to(DType::F32).to(kCPU));
        for (auto& [name, prm] : model.named_parameters()) results.emplace_back("grad." + name, prm.grad().to(kCPU));
      }
      opt.step();
      opt.zero_grad();
      std::printf("step %lld loss %.6f\n", static_cast<long long>(s), losses.back());
    }
    results.emplace_back("losses", from_vector<double>(losses, {steps}));
    data::save_safetensors(out + "/brisk.safetensors", results);

    std::ofstream cfg_file(out + "/config.json");
    cfg_file << "{\"preset\": \"" << preset << "\", \"n_layer\": " << cfg.n_layer << ", \"n_head\": " << cfg.n_head
             << ", \"n_embd\": " << cfg.n_embd << ", \"block_size\": " << cfg.block_size
             << ", \"vocab_size\": " << cfg.vocab_size << ", \"batch\": " << batch << ", \"seq\": " << seq
             << ", \"steps\": " << steps << ", \"lr\": " << lr << ", \"beta1\": " << beta1 << ", \"beta2\": " << beta2
             << ", \"eps\": " << eps << ", \"weight_decay\": " << wd << ", \"mixed_precision\": \"" << mp
             << "\", \"device\": \"" << device_s << "\"}\n";
    BRISK_CHECK(cfg_file.good(), "gpt2_reference: cannot write ", out, "/config.json");
    std::printf("gpt2_reference: %lld parameters, wrote %s\n", static_cast<long long>(model.num_parameters()),
                out.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "gpt2_reference: %s\n", e.what());
    return 1;
  }
  return 0;
}
