// Gradients of layer_norm, dropout and the losses: float64 central differences on contiguous
// and non-contiguous inputs, and forward values of mse / l1 / bce against their formulas.
#include <gtest/gtest.h>

#include <brisk/autograd/ops_loss.h>
#include <brisk/brisk.h>

#include <cmath>

#include "common/errors.h"
#include "common/gradcheck.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;

TEST(LayerNormGrad, GradcheckInputWeightBias) {
  Generator gen(31);
  Tensor x = randn({3, 2, 4}, {.dtype = DType::F64}, &gen);
  Tensor w = randn({2, 4}, {.dtype = DType::F64}, &gen), b = randn({2, 4}, {.dtype = DType::F64}, &gen);
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) {
        return layer_norm(v[0], {2, 4}, v[1], v[2]);
      },
      {x, w, b}, "layer_norm affine");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return layer_norm(v[0], {4}); }, {x}, "layer_norm plain");
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
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (double ls : {0.0, 0.15}) {
      CrossEntropyOptions o{.label_smoothing = ls, .reduction = red};
      expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return cross_entropy(v[0], targets, o); }, {logits},
                               "cross_entropy " + std::string(enum_name(red)) + " ls=" + std::to_string(ls));
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
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    CrossEntropyOptions o{.reduction = red};
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return nll_loss(v[0], targets, o); }, {lp},
                             "nll_loss " + std::string(enum_name(red)));
  }
}

TEST(RegressionLosses, ForwardValuesMatchFormulas) {
  Tensor x = tensor<double>({1.0, -2.0, 3.0}), y = tensor<double>({0.5, 0.0, 4.0});
  // squares 0.25, 4, 1; absolutes 0.5, 2, 1.
  EXPECT_NEAR(mse_loss(x, y).item<double>(), 5.25 / 3, 1e-15);
  EXPECT_NEAR(mse_loss(x, y, Reduction::Sum).item<double>(), 5.25, 1e-15);
  EXPECT_EQ(mse_loss(x, y, Reduction::None).to_vector<double>(), (std::vector<double>{0.25, 4, 1}));
  EXPECT_NEAR(l1_loss(x, y).item<double>(), 3.5 / 3, 1e-15);
  EXPECT_NEAR(l1_loss(x, y, Reduction::Sum).item<double>(), 3.5, 1e-15);
}

TEST(BceWithLogits, ForwardIsStableAndMatchesFormula) {
  // loss = -(y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))).
  Tensor x = tensor<double>({0.3, -1.2, 2.0}), y = tensor<double>({1.0, 0.0, 0.25});
  std::vector<double> xv = {0.3, -1.2, 2.0}, yv = {1.0, 0.0, 0.25};
  std::vector<double> got = binary_cross_entropy_with_logits(x, y, Reduction::None).to_vector<double>();
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
  binary_cross_entropy_with_logits(x, tensor<double>({0.2}), Reduction::Sum).backward();
  EXPECT_NEAR(x.grad().item<double>(), 0.3, 1e-15);
}

TEST(RegressionLossGrad, GradcheckMseL1Bce) {
  Generator gen(36);
  Tensor a = randn({3, 4}, {.dtype = DType::F64}, &gen), b = randn({3, 4}, {.dtype = DType::F64}, &gen);
  Tensor p = rand({3, 4}, {.dtype = DType::F64}, &gen);
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    const std::string r(enum_name(red));
    expect_gradcheck_layouts([red](const std::vector<Tensor>& v) { return mse_loss(v[0], v[1], red); }, {a, b},
                             "mse " + r);
    expect_gradcheck_layouts([red](const std::vector<Tensor>& v) { return l1_loss(v[0], v[1], red); }, {a, b},
                             "l1 " + r);
    expect_gradcheck_layouts(
        [red](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1], red); }, {a, p},
        "bce " + r);
  }
}

// --- class weights (cross_entropy, nll_loss) and weight / pos_weight (BCE with logits) ----------
namespace {

// PyTorch's weighted cross entropy, element by element: (N, C) logits, ignore_index -100.
std::vector<double> naive_weighted_ce(const std::vector<double>& z, const std::vector<int64_t>& t,
                                      const std::vector<double>& w, int64_t C, double e, Reduction red) {
  const int64_t N = static_cast<int64_t>(t.size());
  std::vector<double> per(static_cast<size_t>(N), 0.0);
  double wsum = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] == -100) continue;
    double mx = -1e300, s = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, z[n * C + c]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(z[n * C + c] - mx);
    auto logp = [&](int64_t c) { return z[n * C + c] - mx - std::log(s); };
    double smooth = 0;
    for (int64_t c = 0; c < C; ++c) smooth += -w[c] * logp(c);
    per[n] = (1 - e) * -w[t[n]] * logp(t[n]) + e / static_cast<double>(C) * smooth;
    wsum += w[t[n]];
  }
  if (red == Reduction::None) return per;
  double total = 0;
  for (double v : per) total += v;
  return {red == Reduction::Sum ? total : total / wsum};
}

}  // namespace

TEST(CrossEntropyWeights, MatchPyTorchFormulaForEveryReductionAndSmoothing) {
  Generator gen(40);
  const int64_t C = 4;
  Tensor logits = randn({5, C}, {.dtype = DType::F64}, &gen);
  const std::vector<int64_t> tv = {0, 3, -100, 2, 3};
  const std::vector<double> wv = {0.5, 2.0, 1.0, 3.0};
  Tensor targets = from_vector<int64_t>(tv, {5}), w = from_vector<double>(wv, {C});
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (double e : {0.0, 0.2}) {
      const std::string what = "weighted cross_entropy " + std::string(enum_name(red)) + " e=" + std::to_string(e);
      CrossEntropyOptions o{.label_smoothing = e, .reduction = red, .weight = w};
      std::vector<double> got = cross_entropy(logits, targets, o).to_vector<double>();
      std::vector<double> want = naive_weighted_ce(logits.to_vector<double>(), tv, wv, C, e, red);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << what << " element " << i;
      expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return cross_entropy(v[0], targets, o); }, {logits},
                               what);
    }
  }
  // All-ones weights give the unweighted (fused-kernel) result.
  CrossEntropyOptions ones_w{.label_smoothing = 0.1, .weight = ones({C}, {.dtype = DType::F64})};
  EXPECT_NEAR(cross_entropy(logits, targets, ones_w).item<double>(),
              cross_entropy(logits, targets, {.label_smoothing = 0.1}).item<double>(), 1e-12);
}

TEST(CrossEntropyWeights, SpatialLogitsAndNllLoss) {
  Generator gen(41);
  Tensor logits = randn({2, 3, 2, 2}, {.dtype = DType::F64}, &gen);
  Tensor targets = from_vector<int64_t>({0, 1, 2, 7, 2, 2, 1, 0}, {2, 2, 2});
  Tensor w = from_vector<double>({1.0, 0.25, 4.0}, {3});
  CrossEntropyOptions o{.ignore_index = 7, .weight = w};
  expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return cross_entropy(v[0], targets, o); }, {logits},
                           "weighted cross_entropy spatial");
  // nll_loss(log_softmax(x)) is cross_entropy(x), weights included.
  EXPECT_NEAR(nll_loss(log_softmax(logits, 1), targets, o).item<double>(),
              cross_entropy(logits, targets, o).item<double>(), 1e-12);
  Tensor lp = log_softmax(randn({4, 3}, {.dtype = DType::F64}, &gen), 1);
  Tensor t = from_vector<int64_t>({2, -100, 0, 1}, {4});
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    CrossEntropyOptions on{.reduction = red, .weight = w};
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return nll_loss(v[0], t, on); }, {lp},
                             "weighted nll_loss " + std::string(enum_name(red)));
  }
  // -(w[2] lp[0][2] + w[0] lp[2][0] + w[1] lp[3][1]) / (w[2] + w[0] + w[1])
  std::vector<double> l = lp.to_vector<double>();
  EXPECT_NEAR(nll_loss(lp, t, {.weight = w}).item<double>(),
              -(4.0 * l[2] + 1.0 * l[6] + 0.25 * l[10]) / (4.0 + 1.0 + 0.25), 1e-12);
}

TEST(CrossEntropyWeights, BadWeightsAreClearErrors) {
  Tensor logits = zeros({2, 3}, {.dtype = DType::F64});
  Tensor t = from_vector<int64_t>({0, 2}, {2});
  brisk::testing::expect_error([&] { (void)cross_entropy(logits, t, {.weight = ones({4}, {.dtype = DType::F64})}); },
                               "cross_entropy: weight must have shape [3]");
  brisk::testing::expect_error(
      [&] {
        (void)cross_entropy(logits, from_vector<int64_t>({0, 5}, {2}), {.weight = ones({3})});
      },
      "cross_entropy: target 5 is out of range for 3 classes");
}

TEST(BceWithLogitsWeights, MatchPyTorchFormula) {
  // PyTorch: l = w * ((1 - y) x + (1 + (p - 1) y) * log(1 + exp(-x))), p along the last dim.
  Generator gen(42);
  Tensor x = randn({3, 4}, {.dtype = DType::F64}, &gen);
  Tensor y = rand({3, 4}, {.dtype = DType::F64}, &gen);
  Tensor w = rand({3, 1}, {.dtype = DType::F64}, &gen) + 0.5;
  Tensor pw = from_vector<double>({0.5, 1.0, 2.0, 4.0}, {4});
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(), wv = w.to_vector<double>(),
                      pv = pw.to_vector<double>();
  std::vector<double> want(12);
  double total = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      const int k = i * 4 + j;
      const double lw = 1 + (pv[j] - 1) * yv[k];
      want[k] = wv[i] * ((1 - yv[k]) * xv[k] + lw * std::log1p(std::exp(-xv[k])));
      total += want[k];
    }
  }
  for (Reduction red : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    BCEWithLogitsOptions o{.weight = w, .pos_weight = pw, .reduction = red};
    std::vector<double> got = binary_cross_entropy_with_logits(x, y, o).to_vector<double>();
    if (red == Reduction::None) {
      for (int k = 0; k < 12; ++k) EXPECT_NEAR(got[k], want[k], 1e-12) << k;
    } else {
      EXPECT_NEAR(got[0], red == Reduction::Sum ? total : total / 12, 1e-12);
    }
    expect_gradcheck_layouts(
        [&](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1], o); }, {x, y},
        "bce weight+pos_weight " + std::string(enum_name(red)));
  }
  // Each option alone, gradchecked for logits and targets.
  expect_gradcheck_layouts(
      [&](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1], {.pos_weight = pw}); },
      {x, y}, "bce pos_weight");
  expect_gradcheck_layouts(
      [&](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1], {.weight = w}); }, {x, y},
      "bce weight");
  // pos_weight = 1 and weight = 1 give the plain loss.
  EXPECT_NEAR(binary_cross_entropy_with_logits(
                  x, y, {.weight = ones({1}, {.dtype = DType::F64}), .pos_weight = ones({4}, {.dtype = DType::F64})})
                  .item<double>(),
              binary_cross_entropy_with_logits(x, y).item<double>(), 1e-12);
  // The gradient at x == 0 is exact: (1 - y) - (1 + (p - 1) y) / 2.
  Tensor z = zeros({1}, {.dtype = DType::F64, .requires_grad = true});
  binary_cross_entropy_with_logits(z, tensor<double>({0.2}),
                                   {.pos_weight = tensor<double>({3.0}), .reduction = Reduction::Sum})
      .backward();
  EXPECT_NEAR(z.grad().item<double>(), 0.8 - (1 + 2 * 0.2) / 2, 1e-15);
  brisk::testing::expect_error(
      [&] { (void)binary_cross_entropy_with_logits(x, y, {.pos_weight = ones({3}, {.dtype = DType::F64})}); },
      "pos_weight of shape [3] does not broadcast");
}
