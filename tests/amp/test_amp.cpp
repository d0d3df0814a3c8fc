// Mixed precision on the CPU: the autocast policy and the GradScaler's constants and skipping.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>

using namespace brisk;

TEST(Autocast, MatmulLikeOpsRunLowAndSoftmaxLikeOpsRunInF32) {
  manual_seed(0);
  nn::Linear fc(4, 3);
  Tensor x = randn({2, 4});
  {
    amp::Autocast ac(DType::BF16);
    Tensor h = fc(x);
    EXPECT_EQ(h.dtype(), DType::BF16);
    EXPECT_EQ(matmul(x, x.t()).dtype(), DType::BF16);
    EXPECT_EQ(softmax(h, -1).dtype(), DType::F32);
    EXPECT_EQ(log_softmax(h, -1).dtype(), DType::F32);
    EXPECT_EQ(sum(h).dtype(), DType::F32);
    EXPECT_EQ(cross_entropy(h, from_vector<int64_t>({0, 2}, {2})).dtype(), DType::F32);
    EXPECT_EQ(layer_norm(h, {3}).dtype(), DType::F32);
    {
      amp::Autocast off(DType::BF16, /*enabled=*/false);
      EXPECT_EQ(fc(x).dtype(), DType::F32);
    }
    EXPECT_EQ(fc(x).dtype(), DType::BF16);  // restored
  }
  EXPECT_EQ(fc(x).dtype(), DType::F32);
  EXPECT_FALSE(autocast_state().enabled);
}

TEST(Autocast, ParametersAndTheirGradientsStayF32) {
  manual_seed(1);
  nn::Linear fc(4, 3);
  Tensor loss;
  {
    amp::Autocast ac(DType::F16);
    loss = cross_entropy(fc(randn({5, 4})), randint(0, 3, {5}));
  }
  loss.backward();
  EXPECT_EQ(fc.weight.dtype(), DType::F32);
  EXPECT_EQ(fc.weight.grad().dtype(), DType::F32);
  EXPECT_EQ(fc.bias.grad().dtype(), DType::F32);
}

TEST(Autocast, GradientsMatchF32WithinBf16Tolerance) {
  manual_seed(2);
  nn::Linear fc(16, 8);
  Tensor x = randn({4, 16});
  Tensor y = randint(0, 8, {4});
  cross_entropy(fc(x), y).backward();
  std::vector<float> ref = fc.weight.grad().to_vector<float>();
  fc.zero_grad();
  Tensor loss;
  {
    amp::Autocast ac(DType::BF16);
    loss = cross_entropy(fc(x), y);
  }
  loss.backward();
  std::vector<float> low = fc.weight.grad().to_vector<float>();
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(low[i], ref[i], 1.6e-2 * std::fabs(ref[i]) + 2e-3) << i;
}

// Under autocast, cross_entropy on 16-bit logits gives the f32 op's results without an f32 copy
// of the logits: the loss is f32 and bit for bit the loss of the logits cast to f32, and the
// gradient is 16-bit and bit for bit the f32 gradient rounded once (every 16-bit value is exact
// in f32, and the kernel does the f32 op's arithmetic in the same order).
TEST(Autocast, CrossEntropyOnSixteenBitLogitsIsTheF32OpBitForBit) {
  for (DType dt : {DType::BF16, DType::F16}) {
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::string(enum_name(red)));
      manual_seed(3);
      const Tensor z = randn({6, 37}).to(dt).detach().requires_grad_(true);
      const Tensor z32 = z.to(DType::F32).detach().requires_grad_(true);
      const Tensor t = from_vector<int64_t>({3, -100, 36, 0, 5, 17}, {6});
      const CrossEntropyOptions o{.ignore_index = -100, .label_smoothing = 0.1, .reduction = red};
      const Tensor ref = cross_entropy(z32, t, o);
      sum(ref).backward();
      Tensor loss;
      {
        amp::Autocast ac(dt);
        loss = cross_entropy(z, t, o);
      }
      ASSERT_EQ(loss.dtype(), DType::F32);
      EXPECT_EQ(loss.to_vector<float>(), ref.to_vector<float>());
      sum(loss).backward();
      ASSERT_EQ(z.grad().dtype(), dt);
      EXPECT_EQ(z.grad().to(DType::F32).to_vector<float>(), z32.grad().to(dt).to(DType::F32).to_vector<float>());
    }
  }
}

// ... and with no (positions x classes) f32 tensor on the way: forward and backward of a
// classifier's loss over 64 x 4,099 bf16 logits stay below one f32 copy of them in extra memory
// (the cast and the f32 gradient that autocast's f32 op would make are 2 of them).
TEST(Autocast, CrossEntropyOnSixteenBitLogitsMakesNoF32CopyOfThem) {
  manual_seed(4);
  const int64_t rows = 64, classes = 4099;
  const Tensor z = randn({rows, classes}).to(DType::BF16).detach().requires_grad_(true);
  const Tensor t = randint(0, classes, {rows});
  const int64_t before = memory_stats().total_current;
  reset_peak_memory_stats();
  {
    amp::Autocast ac(DType::BF16);
    cross_entropy(z, t).backward();
  }
  const int64_t extra = memory_stats().total_peak - before;
  EXPECT_LT(extra, rows * classes * 4) << "peak extra bytes " << extra;
  EXPECT_GE(extra, rows * classes * 2) << "the bf16 gradient itself";
}

TEST(Autocast, RejectsNonSixteenBitTypesAndBadNames) {
  EXPECT_THROW((amp::Autocast(DType::F32)), Error);
  bool enabled = true;
  EXPECT_EQ(amp::mixed_precision_dtype(MixedPrecision::BF16, &enabled), DType::BF16);
  EXPECT_TRUE(enabled);
  EXPECT_EQ(amp::mixed_precision_dtype(MixedPrecision::FP16, &enabled), DType::F16);
  EXPECT_TRUE(enabled);
  amp::mixed_precision_dtype(MixedPrecision::No, &enabled);
  EXPECT_FALSE(enabled);
  // Names from users (flags, config files) are parsed once, naming every valid spelling.
  EXPECT_EQ(parse_enum<MixedPrecision>("bf16", "--mixed_precision"), MixedPrecision::BF16);
  EXPECT_THROW(parse_enum<MixedPrecision>("fp8", "--mixed_precision"), Error);
}

namespace {
Tensor param(const std::vector<float>& v) {
  Tensor p = from_vector<float>(v, {static_cast<int64_t>(v.size())});
  p.requires_grad_();
  return p;
}
}  // namespace

TEST(GradScaler, DefaultsAreAccelerateAndPyTorchConstants) {
  amp::GradScaler s;
  EXPECT_EQ(s.get_scale(), 65536.0);
  optim::StateDict sd = s.state_dict();
  EXPECT_EQ(sd.scalar("growth_factor"), 2.0);
  EXPECT_EQ(sd.scalar("backoff_factor"), 0.5);
  EXPECT_EQ(sd.scalar("growth_interval"), 2000.0);
}

TEST(GradScaler, ScalesTheLossAndUnscalesTheGradients) {
  Tensor p = param({1, 2});
  optim::SGD opt({p}, {.lr = 0.5});
  amp::GradScaler s({.init_scale = 8.0});
  s.scale((p * p).sum()).backward();
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{16, 32}));  // 8 * 2p
  EXPECT_TRUE(s.step(opt));
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{2, 4}));  // unscaled
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0, 0}));         // p - 0.5 * 2p
  s.update();
  EXPECT_EQ(s.get_scale(), 8.0);
  EXPECT_EQ(s.growth_tracker(), 1);
}

TEST(GradScaler, InfOrNanSkipsTheStepAndHalvesTheScaleWithParametersUntouched) {
  for (float bad : {INFINITY, NAN}) {
    Tensor p = param({1, 2, 3});
    optim::Adam opt({p}, {.lr = 0.1});
    amp::GradScaler s;
    p.set_grad(from_vector<float>({1, bad, 1}, {3}));
    EXPECT_FALSE(s.step(opt));
    EXPECT_TRUE(s.found_inf());
    s.update();
    EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(s.get_scale(), 32768.0);
    EXPECT_EQ(opt.steps_taken(), 0);
  }
}

TEST(GradScaler, ScaleDoublesAfterGrowthIntervalCleanSteps) {
  Tensor p = param({1});
  optim::SGD opt({p}, {.lr = 0.0});
  amp::GradScaler s({.init_scale = 4.0, .growth_interval = 3});
  auto clean_step = [&] {
    p.set_grad(from_vector<float>({1}, {1}));
    EXPECT_TRUE(s.step(opt));
    s.update();
  };
  clean_step();
  clean_step();
  EXPECT_EQ(s.get_scale(), 4.0);
  clean_step();
  EXPECT_EQ(s.get_scale(), 8.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  // An overflow resets the count.
  clean_step();
  p.set_grad(from_vector<float>({INFINITY}, {1}));
  s.step(opt);
  s.update();
  EXPECT_EQ(s.get_scale(), 4.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScaler, StateDictRoundTripAndDoubleUnscaleError) {
  Tensor p = param({1});
  optim::SGD opt({p}, {.lr = 0.1});
  amp::GradScaler s({.init_scale = 16.0, .growth_interval = 5});
  p.set_grad(from_vector<float>({1}, {1}));
  s.unscale_(opt);
  EXPECT_THROW(s.unscale_(opt), Error);
  s.step(opt);
  s.update();
  amp::GradScaler t;
  t.load_state_dict(s.state_dict());
  EXPECT_EQ(t.get_scale(), 16.0);
  EXPECT_EQ(t.growth_tracker(), 1);
  EXPECT_THROW(amp::GradScaler({.backoff_factor = 2.0}), Error);
}

TEST(GradScaler, FoundInfIsCombinedAcrossRanksThroughTheReducer) {
  Tensor p = param({1});
  optim::SGD opt({p}, {.lr = 1.0});
  amp::GradScaler s;
  s.set_found_inf_reducer([](bool) { return true; });  // another rank overflowed
  p.set_grad(from_vector<float>({1}, {1}));
  EXPECT_FALSE(s.step(opt));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1}));
}
