// LR schedules (closed forms equal to PyTorch's) and gradient clipping.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>
#include <numbers>

using namespace brisk;

namespace {
Tensor zero_param() {
  Tensor p = zeros({2});
  p.requires_grad_();
  return p;
}
std::vector<double> lrs(optim::LRScheduler& s, int n) {
  std::vector<double> out{s.get_last_lr()};
  for (int i = 1; i < n; ++i) {
    s.step();
    out.push_back(s.get_last_lr());
  }
  return out;
}
void expect_all_near(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << "step " << i;
}
}  // namespace

TEST(Schedules, StepLRDecaysEveryStepSize) {
  Tensor p = zero_param();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::StepLR s(opt, 2, 0.5);
  expect_all_near(lrs(s, 6), {1, 1, 0.5, 0.5, 0.25, 0.25});
}

TEST(Schedules, MultiStepLRDecaysAtMilestones) {
  Tensor p = zero_param();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::MultiStepLR s(opt, {1, 3}, 0.1);
  expect_all_near(lrs(s, 5), {1, 0.1, 0.1, 0.01, 0.01});
}

TEST(Schedules, ExponentialLR) {
  Tensor p = zero_param();
  optim::SGD opt({p}, {.lr = 2.0});
  optim::ExponentialLR s(opt, 0.5);
  expect_all_near(lrs(s, 4), {2, 1, 0.5, 0.25});
}

TEST(Schedules, CosineAnnealingReachesEtaMinAtTMax) {
  Tensor p = zero_param();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::CosineAnnealingLR s(opt, 4, 0.1);
  auto v = lrs(s, 5);
  expect_all_near(v, {1.0, 0.1 + 0.9 * (1 + std::cos(std::numbers::pi / 4)) / 2, 0.55,
                      0.1 + 0.9 * (1 + std::cos(3 * std::numbers::pi / 4)) / 2, 0.1});
}

TEST(Schedules, LinearWarmupThenCosineOrLinearDecay) {
  Tensor p = zero_param();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::WarmupLR cosine(opt, {.warmup_steps = 2, .total_steps = 4, .decay = optim::WarmupDecay::Cosine});
  expect_all_near(lrs(cosine, 6), {0.0, 0.5, 1.0, 0.5, 0.0, 0.0});
  optim::SGD opt2({zero_param()}, {.lr = 1.0});
  optim::WarmupLR linear(opt2,
                         {.warmup_steps = 1, .total_steps = 5, .decay = optim::WarmupDecay::Linear, .min_factor = 0.2});
  expect_all_near(lrs(linear, 6), {0.0, 1.0, 0.8, 0.6, 0.4, 0.2});
  EXPECT_THROW(optim::WarmupLR(opt2, {.warmup_steps = 4, .total_steps = 4}), Error);  // no step left to decay
  EXPECT_EQ(parse_enum<optim::WarmupDecay>("linear", "decay"), optim::WarmupDecay::Linear);
  EXPECT_THROW((void)parse_enum<optim::WarmupDecay>("step", "decay"), Error);
}

TEST(Schedules, LambdaLRAndStateDictResume) {
  Tensor p = zero_param();
  optim::SGD opt({p}, {.lr = 0.5});
  optim::LambdaLR s(opt, [](int64_t n) { return 1.0 / static_cast<double>(n + 1); });
  s.step();
  s.step();
  EXPECT_NEAR(opt.lr(), 0.5 / 3, 1e-15);
  optim::StateDict sd = s.state_dict();
  optim::SGD opt2({zero_param()}, {.lr = 0.5});
  optim::LambdaLR s2(opt2, [](int64_t n) { return 1.0 / static_cast<double>(n + 1); });
  s2.load_state_dict(sd);
  EXPECT_EQ(s2.last_step(), 2);
  EXPECT_NEAR(opt2.lr(), 0.5 / 3, 1e-15);
}

TEST(Clip, GradNormScalesAllGradientsTogetherAndReturnsTheTotal) {
  Tensor a = zeros({2}), b = zeros({1});
  a.requires_grad_();
  b.requires_grad_();
  a.set_grad(from_vector<float>({3, 0}, {2}));
  b.set_grad(from_vector<float>({4}, {1}));
  double norm = optim::clip_grad_norm_({a, b}, 1.0);
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_NEAR(a.grad().to_vector<float>()[0], 0.6, 1e-6);
  EXPECT_NEAR(b.grad().to_vector<float>()[0], 0.8, 1e-6);
  // Already small: untouched.
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 10.0), 1.0, 1e-6);
  EXPECT_NEAR(b.grad().to_vector<float>()[0], 0.8, 1e-6);
  // Infinity norm.
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 0.4, INFINITY), 0.8, 1e-6);
  EXPECT_NEAR(b.grad().to_vector<float>()[0], 0.4, 1e-6);
}

TEST(Clip, NonFiniteNormIsReportedOrRejected) {
  Tensor a = zeros({2});
  a.requires_grad_();
  a.set_grad(from_vector<float>({NAN, 1}, {2}));
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm_({a}, 1.0)));
  EXPECT_THROW(optim::clip_grad_norm_({a}, 1.0, 2.0, /*error_if_nonfinite=*/true), Error);
}

TEST(Clip, GradValueClampsElementwise) {
  Tensor a = zeros({3});
  a.requires_grad_();
  a.set_grad(from_vector<float>({-5, 0.5f, 7}, {3}));
  optim::clip_grad_value_({a}, 1.0);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{-1, 0.5f, 1}));
}
