// The Accelerator's `deterministic` and `nan_watch` options on a real GPU. With deterministic on,
// two trainings from the same seed end with the same bytes in every parameter: the example CNN
// (Adam) and GPT-2 tiny (AdamW with clipping), each in fp32 and under bf16 autocast. The plan
// caches (cuDNN convolution algorithms, cuDNN attention engines) are emptied before each training,
// so the second one chooses afresh, as a new process would. nan_watch names the first parameter
// whose gradient is not finite with the CPU's message (recording mode counts its one host read per
// step: test_step_checks_recorded.cpp). Needs a GPU; skips otherwise.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/attention.h>
#include <brisk/kernels/conv_plan.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/settings.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.h"
#include "cuda/gpu_skip.h"

using namespace brisk;

namespace {

using ParamBytes = std::vector<std::pair<std::string, std::string>>;

// Every parameter's name and bytes, copied to the host, in registration order.
ParamBytes parameter_bytes(const nn::Module& m) {
  ParamBytes out;
  for (const auto& [name, p] : m.named_parameters()) {
    const Tensor c = kernels::contiguous(kernels::to_device(p.detach(), kCPU));
    out.emplace_back(name, std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
  }
  return out;
}

struct TrainingRun {
  ParamBytes before, after;
  std::vector<double> losses;
};

// `steps` training steps of `net` with `opt` on the GPU through an Accelerator (deterministic on or
// off, bf16 autocast or none); `loss` runs the forward pass on the batch it holds, moved to the
// device given; `clip`: the gradients' norm is clipped to 1 before each step.
TrainingRun train_on_gpu(nn::Module& net, optim::Optimizer& opt, const std::function<Tensor(const Device&)>& loss,
                         bool bf16, bool deterministic, int steps, bool clip) {
  kernels::clear_conv_plans();
  kernels::clear_attention_plans();
  Accelerator acc(
      {.mixed_precision = bf16 ? MixedPrecision::BF16 : MixedPrecision::No, .deterministic = deterministic});
  acc.prepare(net, opt);
  EXPECT_TRUE(acc.device().is_cuda());
  TrainingRun run;
  run.before = parameter_bytes(net);
  for (int i = 0; i < steps; ++i) {
    Tensor l;
    {
      auto ac = acc.autocast();
      l = loss(acc.device());
    }
    acc.backward(l);
    if (clip) acc.clip_grad_norm_(net, 1.0);
    opt.step();
    opt.zero_grad();
    run.losses.push_back(l.item<double>());
  }
  run.after = parameter_bytes(net);
  return run;
}

// The example CNN on a fixed random batch of 32 images, Adam, 5 steps.
TrainingRun train_cnn(bool bf16, bool deterministic, uint64_t seed) {
  manual_seed(seed);
  models::FashionCNN net;
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  Tensor x = randn({32, 1, 28, 28});
  Tensor y = randint(0, 10, {32});
  auto loss = [&](const Device& d) {
    if (x.device() != d) x = x.to(d), y = y.to(d);
    return nn::cross_entropy(net(x), y);
  };
  return train_on_gpu(net, opt, loss, bf16, deterministic, 5, false);
}

// GPT-2 tiny on a fixed random batch of 4 x 64 tokens, AdamW with weight decay and clipping, 5 steps.
TrainingRun train_gpt2_tiny(bool bf16, bool deterministic, uint64_t seed) {
  manual_seed(seed);
  const models::GPT2Config cfg = models::GPT2Config::preset("tiny");
  models::GPT2 net(cfg);
  optim::AdamW opt(net.parameters(), {.lr = 1e-3, .weight_decay = 0.1});
  Tensor idx = randint(0, cfg.vocab_size, {4, cfg.block_size}, {.dtype = DType::I64});
  Tensor tgt = randint(0, cfg.vocab_size, {4, cfg.block_size}, {.dtype = DType::I64});
  auto loss = [&](const Device& d) {
    if (idx.device() != d) idx = idx.to(d), tgt = tgt.to(d);
    return nn::cross_entropy(net(idx).reshape({-1, cfg.vocab_size}), tgt.reshape({-1}));
  };
  return train_on_gpu(net, opt, loss, bf16, deterministic, 5, true);
}

// a and b trained the same model from the same seed: every parameter (all of them, each changed
// by the training) has the same bytes, and the losses are the same numbers.
void expect_same_bits(const TrainingRun& a, const TrainingRun& b, size_t params, const std::string& what) {
  ASSERT_EQ(a.after.size(), params) << what << ": every parameter is compared";
  ASSERT_EQ(b.after.size(), params) << what;
  for (size_t i = 0; i < params; ++i) {
    EXPECT_EQ(a.before[i], b.before[i]) << what << ": " << a.before[i].first << " starts the same";
    EXPECT_NE(a.after[i].second, a.before[i].second) << what << ": " << a.after[i].first << " did not train";
    EXPECT_TRUE(a.after[i] == b.after[i]) << what << ": " << a.after[i].first << " differs between two trainings";
  }
  EXPECT_EQ(a.losses, b.losses) << what;
  for (double l : a.losses) EXPECT_TRUE(std::isfinite(l)) << what;
}

// The comparison sees a difference where there is one: another seed changes every parameter.
void expect_other_bits(const TrainingRun& a, const TrainingRun& other, const std::string& what) {
  ASSERT_EQ(a.after.size(), other.after.size());
  for (size_t i = 0; i < a.after.size(); ++i)
    EXPECT_NE(a.after[i].second, other.after[i].second) << what << ": " << a.after[i].first;
}

}  // namespace

TEST(DeterministicTrainingOnTheGpu, TheExampleCnnTrainsToTheSameBitsTwice) {
  SKIP_WITHOUT_GPU();
  kernels::DeterministicGuard restore(kernels::deterministic());
  const size_t params = models::FashionCNN().named_parameters().size();
  for (bool bf16 : {false, true}) {
    const std::string what = bf16 ? "CNN bf16" : "CNN fp32";
    const TrainingRun a = train_cnn(bf16, true, 7), b = train_cnn(bf16, true, 7);
    expect_same_bits(a, b, params, what);
    expect_other_bits(a, train_cnn(bf16, true, 8), what + ", another seed");
  }
}

TEST(DeterministicTrainingOnTheGpu, Gpt2TinyTrainsToTheSameBitsTwice) {
  SKIP_WITHOUT_GPU();
  kernels::DeterministicGuard restore(kernels::deterministic());
  const size_t params = models::GPT2(models::GPT2Config::preset("tiny")).named_parameters().size();
  for (bool bf16 : {false, true}) {
    const std::string what = bf16 ? "GPT-2 tiny bf16" : "GPT-2 tiny fp32";
    const TrainingRun a = train_gpt2_tiny(bf16, true, 7), b = train_gpt2_tiny(bf16, true, 7);
    expect_same_bits(a, b, params, what);
    expect_other_bits(a, train_gpt2_tiny(bf16, true, 8), what + ", another seed");
    // With the switch off, atomicAdd kernels may run (the embedding's backward): the bits may then
    // differ or not; what this GPU did is recorded, not asserted.
    const TrainingRun c = train_gpt2_tiny(bf16, false, 7), d = train_gpt2_tiny(bf16, false, 7);
    const bool same = c.after == d.after;
    RecordProperty(bf16 ? "bf16_deterministic_off_same_bits" : "fp32_deterministic_off_same_bits", same ? 1 : 0);
    std::cout << what << ", deterministic off: two trainings " << (same ? "gave the same bits" : "differ") << "\n";
  }
}

namespace {

// Which gradients a step poisons: f2.weight with NaN (sqrt(0 * w)), f1.bias with inf
// (sqrt(b - b): finite forward, infinite derivative), both, or the loss itself.
enum class Poison { F2WeightNaN, F1BiasInfAndF2WeightNaN, LossInf };

// The Accelerator's nan_watch error for a poisoned step of the example CNN on the GPU or the CPU,
// after one finite step; checks that the parameters kept their last finite values.
std::string nan_watch_message(bool cpu, Poison poison) {
  Accelerator acc({.cpu = cpu, .nan_watch = true});
  EXPECT_EQ(acc.device().is_cuda(), !cpu);
  manual_seed(3);
  models::FashionCNN net;
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  acc.prepare(net, opt);
  const Tensor x = randn({8, 1, 28, 28}).to(acc.device());
  const Tensor y = randint(0, 10, {8}).to(acc.device());
  acc.backward(nn::cross_entropy(net(x), y));  // finite: no error
  opt.step();
  opt.zero_grad();
  const ParamBytes before = parameter_bytes(net);
  Tensor loss = nn::cross_entropy(net(x), y);
  if (poison != Poison::LossInf) loss = loss + sqrt(net.f2.weight * 0.0).sum();
  if (poison == Poison::F1BiasInfAndF2WeightNaN) loss = loss + sqrt(net.f1.bias - net.f1.bias.detach()).sum();
  if (poison == Poison::LossInf) loss = loss * std::numeric_limits<double>::infinity();
  const std::string msg = brisk::testing::error_of([&] { acc.backward(loss); });
  EXPECT_TRUE(parameter_bytes(net) == before) << "the optimizer has not stepped";
  return msg;
}

// The poisoned steps' messages, where the CPU computes them (also without a GPU: the cases say
// what they mean to).
struct NanWatchCase {
  Poison poison;
  std::string expected;
};
const std::vector<NanWatchCase>& nan_watch_cases() {
  static const std::vector<NanWatchCase> cases = {
      {Poison::F2WeightNaN, "the gradient of parameter 'f2.weight' contains NaN (shape [10, 256])"},
      {Poison::F1BiasInfAndF2WeightNaN, "the gradient of parameter 'f1.bias' contains inf (shape [256])"},
      {Poison::LossInf, "the loss is inf"}};
  return cases;
}

}  // namespace

TEST(NanWatchOnTheGpu, ThePoisonedStepsNameTheirParameterOnTheCpu) {
  for (const NanWatchCase& c : nan_watch_cases()) {
    const std::string cpu = nan_watch_message(true, c.poison);
    EXPECT_NE(cpu.find(c.expected), std::string::npos) << cpu;
    EXPECT_NE(cpu.find("(nan_watch, backward call 2)"), std::string::npos) << cpu;
  }
}

TEST(NanWatchOnTheGpu, NamesTheFirstParameterWithANonFiniteGradientAsTheCpuDoes) {
  SKIP_WITHOUT_GPU();
  for (const NanWatchCase& c : nan_watch_cases()) {
    const std::string gpu = nan_watch_message(false, c.poison);
    EXPECT_NE(gpu.find(c.expected), std::string::npos) << gpu;
    EXPECT_EQ(gpu, nan_watch_message(true, c.poison)) << "the GPU's message is the CPU's";
  }
}
