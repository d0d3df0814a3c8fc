// Differentiable conv2d and pooling: float64 finite-difference gradient checks on contiguous
// and non-contiguous inputs, and the graph plumbing (optional bias, inputs without grad).
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cmath>

#include "common/gradcheck.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;
using brisk::testing::seeded_randn;

TEST(Conv2dGrad, PlainWithBias) {
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2]); },
                           {seeded_randn({2, 2, 5, 4}, 1), seeded_randn({3, 2, 3, 2}, 2), seeded_randn({3}, 3)},
                           "conv2d plain");
}

TEST(Conv2dGrad, StridePaddingDilation) {
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) {
        return conv2d(v[0], v[1], v[2], {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}});
      },
      {seeded_randn({2, 2, 6, 5}, 4), seeded_randn({2, 2, 3, 2}, 5), seeded_randn({2}, 6)},
      "conv2d stride/padding/dilation");
}

TEST(Conv2dGrad, GroupsAndDepthwise) {
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], {.padding = 1, .groups = 2}); },
      {seeded_randn({2, 4, 4, 4}, 7), seeded_randn({4, 2, 3, 3}, 8), seeded_randn({4}, 9)}, "conv2d groups 2");
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) {
        return conv2d(v[0], v[1], Tensor(), {.stride = 2, .padding = 1, .groups = 3});
      },
      {seeded_randn({1, 3, 5, 5}, 10), seeded_randn({6, 1, 3, 3}, 11)}, "conv2d depthwise, no bias");
}

TEST(Conv2dGrad, PointwiseWithoutIm2col) {
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2]); },
                           {seeded_randn({2, 3, 3, 4}, 12), seeded_randn({4, 3, 1, 1}, 13), seeded_randn({4}, 14)},
                           "conv2d 1x1");
}

TEST(Conv2dGrad, OnlyTheInputsThatNeedGradGetOne) {
  Tensor x = seeded_randn({1, 2, 4, 4}, 15), w = seeded_randn({3, 2, 3, 3}, 16), b = seeded_randn({3}, 17);
  w.requires_grad_();
  conv2d(x, w, b, {.padding = 1}).sum().backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().sizes(), w.sizes());
}

TEST(MaxPool2dGrad, FlowsToTheArgmax) {
  // Distinct values (a scrambled arange) keep the argmax stable under the finite-difference nudge.
  Generator gen(18);
  Tensor x = (randperm(int64_t{2} * 2 * 6 * 7, &gen).to(DType::F64) * 0.1).reshape({2, 2, 6, 7});
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return max_pool2d(v[0], 2); }, {x}, "max_pool2d 2x2");
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) {
        return max_pool2d(v[0], 3, {.stride = {2, 1}, .padding = 1, .dilation = {1, 2}});
      },
      {x}, "max_pool2d padded, dilated, overlapping");
}

TEST(MaxPool2dGrad, WithIndicesReturnsInt64IndicesWithoutGrad) {
  Tensor x = seeded_randn({1, 1, 4, 4}, 19);
  x.requires_grad_();
  auto [values, indices] = max_pool2d_with_indices(x, 2);
  EXPECT_EQ(indices.dtype(), DType::I64);
  EXPECT_TRUE(values.requires_grad());
  EXPECT_FALSE(indices.requires_grad());
}

TEST(AvgPool2dGrad, WithAndWithoutPaddingInTheCount) {
  Tensor x = seeded_randn({2, 2, 5, 6}, 20);
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return avg_pool2d(v[0], 2); }, {x}, "avg_pool2d 2x2");
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) { return avg_pool2d(v[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true}); },
      {x}, "avg_pool2d padded, ceil");
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) {
        return avg_pool2d(v[0], {3, 2}, {.stride = 1, .padding = 1, .count_include_pad = false});
      },
      {x}, "avg_pool2d padded, count_include_pad false");
}

TEST(AdaptiveAvgPool2dGrad, OverlappingAndGlobalWindows) {
  Tensor x = seeded_randn({2, 2, 5, 7}, 21);
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) {
        return adaptive_avg_pool2d(v[0], {3, 4});
      },
      {x}, "adaptive_avg_pool2d 3x4");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], 1); }, {x},
                           "adaptive_avg_pool2d global");
}

TEST(Conv2dGrad, SmallCnnTrainsEndToEnd) {
  // conv -> relu -> maxpool -> conv -> adaptive pool: every parameter gets a finite gradient.
  Tensor x = seeded_randn({4, 1, 8, 8}, 22).to(DType::F32);
  Tensor w1 = (seeded_randn({4, 1, 3, 3}, 23) * 0.3).to(DType::F32),
         w2 = (seeded_randn({5, 4, 3, 3}, 24) * 0.3).to(DType::F32);
  Tensor b1 = zeros({4}), b2 = zeros({5});
  for (Tensor* p : {&w1, &w2, &b1, &b2}) p->requires_grad_();
  Tensor h = max_pool2d(relu(conv2d(x, w1, b1, {.padding = 1})), 2);
  Tensor out = adaptive_avg_pool2d(conv2d(h, w2, b2, {.padding = 1}), 1);
  EXPECT_EQ(out.sizes(), (Shape{4, 5, 1, 1}));
  out.sum().backward();
  for (Tensor* p : {&w1, &w2, &b1, &b2}) {
    ASSERT_TRUE(p->grad().defined());
    for (float g : p->grad().to_vector<float>()) EXPECT_TRUE(std::isfinite(g));
  }
  // Each image adds exactly 1 to d(sum of global means)/db2.
  EXPECT_EQ(b2.grad().to_vector<float>(), std::vector<float>(5, 4.f));
}
