// Gradients of layer_norm, dropout and the losses: float64 central differences on contiguous
// and non-contiguous inputs, and forward values of mse / l1 / bce against their formulas.
#include <gtest/gtest.h>

#include <brisk/autograd/ops_loss.h>
#include <brisk/brisk.h>

#include <cmath>

#include "common/gradcheck.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;

TEST(LayerNormGrad, GradcheckInputWeightBias) {
  Generator gen(31);
  Tensor x = randn({3, 2, 4}, {.dtype = DType::F64}, &gen);
  Tensor w = randn({2, 4}, {.dtype = DType::F64}, &gen), b = randn({2, 4}, {.dtype = DType::F64}, &gen);
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return layer_norm(v[0], {2, 4}, v[1], v[2]); },
                           {x, w, b}, "layer_norm affine");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return layer_norm(v[0], {4}); }, {x},
                           "layer_norm plain");
}

TEST(DropoutGrad, GradientIsMaskTimesScale) {
  Generator gen(32);
  Tensor x = randn({100}, {.dtype = DType::F64}, &gen);
  x.requires_grad_();
  Tensor y = dropout(x, 0.4, true, &gen);
  y.sum().backward();
  std::vector<double> yv = y.to_vector<double>(), g = x.grad().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_DOUBLE_EQ(g[i], yv[i] == 0.0 ? 0.0 : 1.0 / 0.6);
}

TEST(CrossEntropyGrad, GradcheckWithSmoothingIgnoreIndexAndReductions) {
  Generator gen(33);
  Tensor logits = randn({4, 5}, {.dtype = DType::F64}, &gen);
  Tensor targets = from_vector<int64_t>({0, 4, -100, 2}, {4});
  for (const char* red : {"mean", "sum", "none"}) {
    for (double ls : {0.0, 0.15}) {
      CrossEntropyOptions o{.label_smoothing = ls, .reduction = red};
      expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return cross_entropy(v[0], targets, o); },
                               {logits}, std::string("cross_entropy ") + red + " ls=" + std::to_string(ls));
    }
  }
}

TEST(CrossEntropyGrad, GradcheckSpatialLogits) {
  Generator gen(34);
  Tensor logits = randn({2, 3, 2, 2}, {.dtype = DType::F64}, &gen);
  Tensor targets = from_vector<int64_t>({0, 1, 2, 7, 2, 2, 1, 0}, {2, 2, 2});
  CrossEntropyOptions o{.ignore_index = 7, .label_smoothing = 0.1};
  expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return cross_entropy(v[0], targets, o); }, {logits},
                           "cross_entropy spatial");
}

TEST(CrossEntropyGrad, MatchesSoftmaxMinusSmoothedOneHot) {
  // d mean_loss / dz[n, c] = (softmax(z)[c] - (1 - e) [c == t] - e / C) / N.
  Tensor z = from_vector<double>({1.0, 2.0, 0.5, 0.0, 0.0, 0.0}, {2, 3});
  z.requires_grad_();
  Tensor t = from_vector<int64_t>({1, 0}, {2});
  cross_entropy(z, t, {.label_smoothing = 0.3}).backward();
  std::vector<double> g = z.grad().to_vector<double>();
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(0.5);
  EXPECT_NEAR(g[1], (std::exp(2.0) / s - 0.7 - 0.1) / 2, 1e-14);
  EXPECT_NEAR(g[0], (std::exp(1.0) / s - 0.1) / 2, 1e-14);
  EXPECT_NEAR(g[3], (1.0 / 3 - 0.7 - 0.1) / 2, 1e-14);
  EXPECT_NEAR(g[4], (1.0 / 3 - 0.1) / 2, 1e-14);
}

TEST(NllLossGrad, GradcheckWithIgnoreIndex) {
  Generator gen(35);
  Tensor lp = randn({4, 3}, {.dtype = DType::F64}, &gen);
  Tensor targets = from_vector<int64_t>({2, -100, 0, 1}, {4});
  for (const char* red : {"mean", "sum", "none"}) {
    CrossEntropyOptions o{.reduction = red};
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return nll_loss(v[0], targets, o); }, {lp},
                             std::string("nll_loss ") + red);
  }
}

TEST(RegressionLosses, ForwardValuesMatchFormulas) {
  Tensor x = tensor<double>({1.0, -2.0, 3.0}), y = tensor<double>({0.5, 0.0, 4.0});
  // squares 0.25, 4, 1; absolutes 0.5, 2, 1.
  EXPECT_NEAR(mse_loss(x, y).item<double>(), 5.25 / 3, 1e-15);
  EXPECT_NEAR(mse_loss(x, y, "sum").item<double>(), 5.25, 1e-15);
  EXPECT_EQ(mse_loss(x, y, "none").to_vector<double>(), (std::vector<double>{0.25, 4, 1}));
  EXPECT_NEAR(l1_loss(x, y).item<double>(), 3.5 / 3, 1e-15);
  EXPECT_NEAR(l1_loss(x, y, "sum").item<double>(), 3.5, 1e-15);
}

TEST(BceWithLogits, ForwardIsStableAndMatchesFormula) {
  // loss = -(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))).
  Tensor x = tensor<double>({0.3, -1.2, 2.0}), y = tensor<double>({1.0, 0.0, 0.25});
  std::vector<double> xv = {0.3, -1.2, 2.0}, yv = {1.0, 0.0, 0.25};
  std::vector<double> got = binary_cross_entropy_with_logits(x, y, "none").to_vector<double>();
  double total = 0;
  for (int i = 0; i < 3; ++i) {
    const double s = 1 / (1 + std::exp(-xv[i]));
    const double expect = -(yv[i] * std::log(s) + (1 - yv[i]) * std::log(1 - s));
    EXPECT_NEAR(got[i], expect, 1e-14);
    total += expect;
  }
  EXPECT_NEAR(binary_cross_entropy_with_logits(x, y).item<double>(), total / 3, 1e-14);
  // Huge logits neither overflow nor lose the linear term: loss(1000, y=0) = 1000.
  EXPECT_NEAR(binary_cross_entropy_with_logits(tensor<double>({1000.0}), tensor<double>({0.0})).item<double>(), 1000.0,
              1e-9);
  EXPECT_NEAR(binary_cross_entropy_with_logits(tensor<double>({-1000.0}), tensor<double>({0.0})).item<double>(), 0.0,
              1e-12);
}

TEST(BceWithLogits, GradientAtZeroIsHalfMinusTarget) {
  Tensor x = tensor<double>({0.0});
  x.requires_grad_();
  binary_cross_entropy_with_logits(x, tensor<double>({0.2}), "sum").backward();
  EXPECT_NEAR(x.grad().item<double>(), 0.3, 1e-15);
}

TEST(RegressionLossGrad, GradcheckMseL1Bce) {
  Generator gen(36);
  Tensor a = randn({3, 4}, {.dtype = DType::F64}, &gen), b = randn({3, 4}, {.dtype = DType::F64}, &gen);
  Tensor p = rand({3, 4}, {.dtype = DType::F64}, &gen);
  for (const char* red : {"mean", "sum", "none"}) {
    std::string r = red;
    expect_gradcheck_layouts([r](const std::vector<Tensor>& v) { return mse_loss(v[0], v[1], r); }, {a, b},
                             "mse " + r);
    expect_gradcheck_layouts([r](const std::vector<Tensor>& v) { return l1_loss(v[0], v[1], r); }, {a, b},
                             "l1 " + r);
    expect_gradcheck_layouts(
        [r](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1], r); }, {a, p},
        "bce " + r);
  }
}
