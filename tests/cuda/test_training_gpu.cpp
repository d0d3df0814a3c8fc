// Training on a real GPU: after a few warm-up steps a training loop (the example CNN with Adam,
// fp32 and bf16 autocast; a GPT-2 block under bf16 autocast with AdamW and clipping) gets every
// block of memory from the caching allocator: no cudaMalloc, counted by the allocator's
// statistics. The loss must also fall, so the steps did train. Needs a GPU; skips otherwise.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>

#include <functional>
#include <string>

#include "cuda/gpu_skip.h"

using namespace brisk;

namespace {

// Runs `step` (one training step returning its detached loss) once, then `warm_up` times, then
// `steps` more times in the same loop shape, and checks that the last `steps` made no cudaMalloc
// and that the loss fell below the first step's.
void expect_steady_state(const std::function<Tensor()>& step, int warm_up, int steps, const std::string& what) {
  const double first = step().item<double>();
  Tensor last;
  for (int i = 0; i < warm_up; ++i) last = step();  // the same loop as below, so the same memory pattern
  cuda::synchronize();
  const int64_t mallocs = cuda::allocator_stats(0).device_allocs;
  for (int i = 0; i < steps; ++i) last = step();
  cuda::synchronize();
  EXPECT_EQ(cuda::allocator_stats(0).device_allocs, mallocs) << what << ": cudaMalloc in steady state";
  EXPECT_LT(last.item<double>(), first) << what << ": the loss did not fall on a fixed batch";
}

}  // namespace

TEST(TrainingOnTheGpu, CnnStepsAfterWarmUpCallNoCudaMalloc) {
  SKIP_WITHOUT_GPU();
  const Device gpu = cuda_device(0);
  for (bool bf16 : {false, true}) {
    manual_seed(5);
    models::FashionCNN net;
    net.to(gpu);
    optim::Adam opt(net.parameters(), {.lr = 1e-3});
    Tensor x = randn({64, 1, 28, 28}, {.device = gpu});
    Tensor y = randint(0, 10, {64}, {.dtype = DType::I64, .device = gpu});
    auto step = [&] {
      opt.zero_grad();
      Tensor loss;
      {
        amp::Autocast ac(DType::BF16, bf16);
        loss = cross_entropy(net(x), y);
      }
      loss.backward();
      opt.step();
      return loss.detach();
    };
    expect_steady_state(step, 5, 30, bf16 ? "CNN bf16" : "CNN fp32");
  }
}

TEST(TrainingOnTheGpu, TransformerStepsUnderBf16AutocastCallNoCudaMalloc) {
  SKIP_WITHOUT_GPU();
  const Device gpu = cuda_device(0);
  manual_seed(6);
  models::GPT2Config cfg = models::GPT2Config::preset("tiny");
  models::GPT2 net(cfg);
  net.to(gpu);
  optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  Tensor idx = randint(0, cfg.vocab_size, {4, 32}, {.dtype = DType::I64, .device = gpu});
  Tensor tgt = randint(0, cfg.vocab_size, {4, 32}, {.dtype = DType::I64, .device = gpu});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      amp::Autocast ac(DType::BF16);
      loss = cross_entropy(net(idx).reshape({-1, cfg.vocab_size}), tgt.reshape({-1}));
    }
    loss.backward();
    optim::clip_grad_norm_(net.parameters(), 1.0);
    opt.step();
    return loss.detach();
  };
  expect_steady_state(step, 5, 20, "GPT-2 block bf16");
}
