// Whole training steps on cuda:0 in recording mode (no GPU needed): the example CNN and a GPT-2
// transformer block run forward, backward and an optimizer step with every tensor on the device.
// That proves each op in the chain has a CUDA path for the dtype used, no step copies device data
// to the host behind the user's back (a hidden synchronisation), and the caching allocator
// reaches a steady state in which a step calls cudaMalloc no more.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>

#include <cstdlib>
#include <iostream>

using namespace brisk;
using cuda::recording::Kind;

namespace {

// Host waits and device-to-host copies in the log: what a step must not do unasked.
size_t host_round_trips(const cuda::recording::Session& rec) {
  return rec.count(Kind::Sync);
}

struct StepCounts {
  size_t launches = 0, library = 0, syncs = 0, mallocs = 0;
};

template <class Step>
StepCounts record_step(cuda::recording::Session& rec, Step&& step) {
  rec.clear();
  step();
  if (std::getenv("BRISK_TEST_PRINT_LOG")) {
    for (const auto& e : rec.entries())
      std::cout << cuda::recording::kind_name(e.kind) << " " << e.name << " s" << e.stream << " " << e.bytes << "\n";
  }
  return {rec.count(Kind::Launch), rec.count(Kind::Library), host_round_trips(rec), rec.count(Kind::Malloc)};
}

}  // namespace

TEST(TrainingRecorded, CnnStepsRunOnTheGpuWithoutHiddenSyncs) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  manual_seed(0);
  models::FashionCNN net;
  net.to(cuda_device());
  for (const auto& [name, p] : net.named_parameters()) ASSERT_TRUE(p.device().is_cuda()) << name;
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  Tensor x = randn({8, 1, 28, 28}).to(cuda_device());
  Tensor y = randint(0, 10, {8}).to(cuda_device());
  DType autocast_dtype = DType::F32;
  auto step = [&] {
    Tensor loss;
    {
      amp::Autocast ac(autocast_dtype == DType::F32 ? DType::BF16 : autocast_dtype, autocast_dtype != DType::F32);
      loss = nn::cross_entropy(net(x), y);
    }
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    autocast_dtype = dt;
    // Two warm-up steps: the first makes the gradients and the optimizer state, the second settles
    // which cached block serves which request.
    record_step(rec, step);
    record_step(rec, step);
    const StepCounts s = record_step(rec, step);
    EXPECT_GT(s.launches, 20u);
    EXPECT_GT(s.library, 2u) << "convolutions and matmuls go to cuDNN and cuBLASLt";
    EXPECT_EQ(s.syncs, 0u) << "a training step never waits for the GPU unasked";
    EXPECT_EQ(s.mallocs, 0u) << "a steady-state step allocates from the cache only";
  }
  for (const auto& [name, p] : net.named_parameters()) {
    EXPECT_TRUE(p.device().is_cuda()) << name;
    EXPECT_EQ(p.dtype(), DType::F32) << name << ": parameters stay f32 under autocast";
  }
}

TEST(TrainingRecorded, TransformerBlockStepsUnderAutocastOnTheCpu) {
  manual_seed(1);
  nn::TransformerBlock block(64, 4, {.dropout = 0.1});
  optim::AdamW opt(block.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  Tensor x = randn({2, 16, 64});
  Tensor loss;
  {
    amp::Autocast ac(DType::BF16);
    loss = square(block(x)).mean();
  }
  loss.backward();
  opt.step();
}

TEST(TrainingRecorded, TransformerBlockStepsRunOnTheGpu) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  manual_seed(1);
  nn::TransformerBlock block(64, 4, {.dropout = 0.1});
  block.to(cuda_device());
  optim::AdamW opt(block.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  Tensor x = randn({2, 16, 64}).to(cuda_device());
  auto step = [&] {
    Tensor loss;
    {
      amp::Autocast ac(DType::BF16);
      loss = square(block(x)).mean();
    }
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  for (int i = 0; i < 3; ++i) record_step(rec, step);  // warm-up (see above); the cache settles by step 3
  const StepCounts s = record_step(rec, step);
  EXPECT_GT(s.launches, 30u);
  EXPECT_EQ(s.syncs, 0u);
  EXPECT_EQ(s.mallocs, 0u);
}
