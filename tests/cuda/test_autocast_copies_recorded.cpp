// GPT-2 training steps on cuda:0 under bf16 autocast, in recording mode (no GPU needed): with
// AdamW's bf16 autocast copies, written by the fused update kernel itself, a step after the first
// launches no cast of any weight (two micro-steps each, which otherwise cast every weight twice),
// launches nothing else more, and allocates and synchronises no more than without them.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/core/profiler.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>

#include <cstdlib>
#include <iostream>
#include <string>

using namespace brisk;
using cuda::recording::Kind;
using models::GPT2;
using models::GPT2Config;

namespace {

struct CopyStepCounts {
  size_t launches = 0, casts = 0, adam = 0, syncs = 0, mallocs = 0;
  int64_t weight_casts = 0;  // the profiler's autocast_weight_cast calls
};

size_t launches_of_kernel(const cuda::recording::Session& rec, const std::string& name) {
  size_t n = 0;
  for (const auto& e : rec.entries(Kind::Launch)) n += e.name == name;
  return n;
}

template <class Step>
CopyStepCounts record_copies_step(cuda::recording::Session& rec, Step&& step) {
  rec.clear();
  profiler::reset();
  step();
  if (std::getenv("BRISK_TEST_PRINT_LOG"))
    for (const auto& e : rec.entries()) std::cout << cuda::recording::kind_name(e.kind) << " " << e.name << "\n";
  int64_t weight_casts = 0;
  for (const profiler::Row& r : profiler::key_averages())
    if (r.name == "autocast_weight_cast") weight_casts = r.calls;
  // "copy" is the cast kernel (kernels::cast launches it for every dtype pair).
  return {rec.count(Kind::Launch), launches_of_kernel(rec, "copy"), launches_of_kernel(rec, "adam_step"),
          rec.count(Kind::Sync),   rec.count(Kind::Malloc),         weight_casts};
}

// The first step and a steady-state step (the fourth) of GPT-2 tiny on the GPU: two micro-steps
// of batch 2 x 32, each its own autocast region, then AdamW.
std::pair<CopyStepCounts, CopyStepCounts> gpt2_steps(bool copies) {
  cuda::recording::Session rec;
  profiler::enable();
  GPT2Config c = GPT2Config::preset("tiny");
  c.block_size = 32;
  manual_seed(0);
  GPT2 model(c);
  model.to(cuda_device());
  optim::AdamW opt(model.param_groups({.lr = 3e-4, .weight_decay = 0.1}));
  if (copies) opt.keep_autocast_copies(DType::BF16);
  const Tensor idx = randint(0, c.vocab_size, {2, 32}).to(cuda_device());
  const Tensor targets = randint(0, c.vocab_size, {2, 32}).to(cuda_device());
  auto step = [&] {
    for (int micro = 0; micro < 2; ++micro) {
      Tensor loss;
      {
        amp::Autocast ac(DType::BF16);
        loss = GPT2::loss(model(idx), targets) / 2.0;
      }
      loss.backward();
    }
    opt.step();
    opt.zero_grad();
  };
  const CopyStepCounts first = record_copies_step(rec, step);
  record_copies_step(rec, step);
  record_copies_step(rec, step);
  const CopyStepCounts steady = record_copies_step(rec, step);
  profiler::disable();
  profiler::reset();
  return {first, steady};
}

}  // namespace

TEST(AutocastCopiesRecorded, Gpt2StepsLaunchNoWeightCastOnceAdamWWritesTheCopies) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  // Weight and bias of four linear layers per block, and the tied head.
  const int64_t cast_params = 8 * GPT2Config::preset("tiny").n_layer + 1;
  const auto [first_plain, plain] = gpt2_steps(false);
  const auto [first_copies, copies] = gpt2_steps(true);

  // Without copies every micro-step's region casts each weight once (the cache serves its other
  // uses): one cast launch per weight per micro-step.
  EXPECT_EQ(plain.weight_casts, 2 * cast_params);
  ASSERT_GE(plain.casts, static_cast<size_t>(2 * cast_params));
  // With them, a step after the first casts no weight at all ...
  EXPECT_EQ(copies.weight_casts, 0);
  EXPECT_EQ(copies.casts, plain.casts - static_cast<size_t>(2 * cast_params)) << "only the weight casts are gone";
  EXPECT_EQ(copies.launches, plain.launches - static_cast<size_t>(2 * cast_params));
  // ... because the update kernel writes them: as many adam_step launches as without copies.
  EXPECT_EQ(copies.adam, plain.adam);
  EXPECT_GT(copies.adam, 0u);
  // The first step writes every copy in its update too: no extra launch there either.
  EXPECT_EQ(first_copies.launches, first_plain.launches);
  // No more allocation or host synchronisation than before: none in a steady-state step.
  EXPECT_EQ(copies.mallocs, 0u);
  EXPECT_EQ(plain.mallocs, 0u);
  EXPECT_EQ(copies.syncs, plain.syncs);
  EXPECT_EQ(first_copies.syncs, first_plain.syncs);
}
