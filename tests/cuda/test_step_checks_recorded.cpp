// The Accelerator's per-step checks on cuda:0 in recording mode (no GPU needed): nan_watch adds
// exactly one device-to-host read (8 bytes, the fused largest |x| over the loss and every
// gradient) and one host wait to a training step, and nothing else; the deterministic switch keeps
// a GPT-2 tiny training step off every atomicAdd kernel, while with it off the embedding's backward
// may add with atomics. Recording runs no kernel, so the values are checked on a GPU
// (test_determinism_gpu.cpp).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/settings.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/gpu_skip.h"

using namespace brisk;
using cuda::recording::Kind;

namespace {

// What a stretch of the log read from the device, and how often the host waited.
struct StepHostReads {
  size_t dtoh = 0, dtoh_bytes = 0, syncs = 0;
};

StepHostReads step_host_reads(const cuda::recording::Session& rec) {
  StepHostReads r;
  for (const auto& e : rec.entries(Kind::Copy))
    if (e.name == "DtoH") {
      ++r.dtoh;
      r.dtoh_bytes += e.bytes;
    }
  r.syncs = rec.count(Kind::Sync);
  return r;
}

// The host reads of the third Accelerator step (the first two make the gradients and the
// optimizer's state) of the example CNN on cuda:0.
StepHostReads cnn_step_host_reads(bool nan_watch, MixedPrecision mixed_precision) {
  cuda::recording::Session rec;
  Accelerator acc({.mixed_precision = mixed_precision, .nan_watch = nan_watch});
  manual_seed(0);
  models::FashionCNN net;
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  acc.prepare(net, opt);
  EXPECT_EQ(net.c1.weight.device(), cuda_device(0));
  const Tensor x = randn({8, 1, 28, 28}).to(acc.device());
  const Tensor y = randint(0, 10, {8}).to(acc.device());
  StepHostReads last;
  for (int step = 0; step < 3; ++step) {
    rec.clear();
    Tensor loss;
    {
      auto ac = acc.autocast();
      loss = nn::cross_entropy(net(x), y);
    }
    acc.backward(loss);
    opt.step();
    opt.zero_grad();
    last = step_host_reads(rec);
  }
  return last;
}

}  // namespace

TEST(StepChecksRecorded, RecordedCopiesSayWhichWayTheyWent) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  const Tensor dev = from_vector<float>({1, 2, 3}, {3}).to(cuda_device());
  EXPECT_EQ(dev.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  std::vector<std::string> names;
  for (const auto& e : rec.entries(Kind::Copy)) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"HtoD", "DtoH"}));
}

TEST(StepChecksRecorded, NanWatchReadsTheDeviceOncePerStep) {
  SKIP_WITHOUT_RECORDING();
  struct Case {
    MixedPrecision mp;
    const char* name;
    size_t reads_without;  // fp16: the GradScaler reads its found-inf flag every step
  };
  for (const Case& c : {Case{MixedPrecision::No, "fp32", 0}, Case{MixedPrecision::BF16, "bf16", 0},
                        Case{MixedPrecision::FP16, "fp16", 1}}) {
    SCOPED_TRACE(c.name);
    const StepHostReads off = cnn_step_host_reads(false, c.mp);
    const StepHostReads on = cnn_step_host_reads(true, c.mp);
    EXPECT_EQ(off.dtoh, c.reads_without) << "without nan_watch";
    EXPECT_EQ(off.syncs, c.reads_without) << "without nan_watch";
    EXPECT_EQ(on.dtoh, c.reads_without + 1) << "nan_watch reads one value per step";
    EXPECT_EQ(on.dtoh_bytes - off.dtoh_bytes, sizeof(double)) << "the one f64 largest |x|";
    EXPECT_EQ(on.syncs, c.reads_without + 1) << "nan_watch waits for the GPU once per step";
  }
}

namespace {

// The kernel names one GPT-2 tiny training step (bf16 autocast, AdamW) launches on cuda:0.
std::vector<std::string> gpt2_step_launches(bool deterministic) {
  kernels::DeterministicGuard det(deterministic);
  cuda::recording::Session rec;
  manual_seed(0);
  const models::GPT2Config cfg = models::GPT2Config::preset("tiny");
  models::GPT2 net(cfg);
  net.to(cuda_device());
  optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  const Tensor idx = randint(0, cfg.vocab_size, {2, cfg.block_size}, {.dtype = DType::I64}).to(cuda_device());
  const Tensor tgt = randint(0, cfg.vocab_size, {2, cfg.block_size}, {.dtype = DType::I64}).to(cuda_device());
  Tensor loss;
  {
    amp::Autocast ac(DType::BF16);
    loss = nn::cross_entropy(net(idx).reshape({-1, cfg.vocab_size}), tgt.reshape({-1}));
  }
  loss.backward();
  opt.step();
  std::vector<std::string> names;
  for (const auto& e : rec.entries(Kind::Launch)) names.push_back(e.name);
  return names;
}

bool has_launch(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST(StepChecksRecorded, DeterministicGpt2StepLaunchesNoAtomicKernel) {
  SKIP_WITHOUT_RECORDING();
  const std::vector<std::string> on = gpt2_step_launches(true);
  const std::vector<std::string> off = gpt2_step_launches(false);
  ASSERT_GT(on.size(), 30u);
  for (const std::string& name : on) EXPECT_EQ(name.find("atomic"), std::string::npos) << name;
  EXPECT_TRUE(has_launch(on, "embedding_backward_runs")) << "the token embedding's ordered backward";
  // Not faked: the switch is what keeps the atomics out.
  EXPECT_TRUE(has_launch(off, "embedding_backward_atomic")) << "with the switch off atomicAdd is allowed";
  EXPECT_FALSE(has_launch(off, "embedding_backward_runs"));
}
