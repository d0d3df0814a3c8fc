// Forward values of the nn kernels against references written here: embedding lookup and its
// scatter-add, layer norm, dropout's seeded mask, and cross entropy / NLL by their formulas
// (label smoothing, ignore_index, every reduction).
#include <gtest/gtest.h>

#include <brisk/autograd/ops_loss.h>
#include <brisk/brisk.h>
#include <brisk/kernels/nn.h>

#include <cmath>
#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;
using kernels::Reduction;

// --- embedding ---------------------------------------------------------------------------

TEST(Embedding, LooksUpRowsForAnyIndexShape) {
  Tensor w = from_vector<float>({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor idx = from_vector<int64_t>({2, 0, 2, 1}, {2, 2});
  Tensor out = kernels::embedding(idx, w);
  EXPECT_EQ(out.sizes(), (Shape{2, 2, 2}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));
  Tensor idx32 = from_vector<int32_t>({1}, {1});
  EXPECT_EQ(kernels::embedding(idx32, w).to_vector<float>(), (std::vector<float>{10, 11}));
}

TEST(Embedding, BackwardSumsRepeatedIndicesAndSkipsPaddingRow) {
  Tensor idx = from_vector<int64_t>({1, 3, 1, 0}, {4});
  Tensor grad = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  Tensor gw = kernels::embedding_backward(grad, idx, 4, /*padding_idx=*/0);
  // row 0 is padding (zero), row 1 = [1,2] + [5,6], row 2 unused, row 3 = [3,4].
  EXPECT_EQ(gw.to_vector<double>(), (std::vector<double>{0, 0, 6, 8, 0, 0, 3, 4}));
}

// --- layer norm ------------------------------------------------------------------------

TEST(LayerNorm, MatchesNaiveOverTrailingDims) {
  Generator gen(11);
  for (DType dt : {DType::F64, DType::F32}) {
    Tensor x = randn({2, 3, 4}, {.dtype = dt}, &gen);
    Tensor w = randn({3, 4}, {.dtype = dt}, &gen), b = randn({3, 4}, {.dtype = dt}, &gen);
    kernels::LayerNormResult r = kernels::layer_norm(x, {3, 4}, w, b, 1e-5);
    std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> y = r.y.to_vector<double>(), mean = r.mean.to_vector<double>(),
                        rstd = r.rstd.to_vector<double>();
    for (int64_t row = 0; row < 2; ++row) {
      double mu = 0, var = 0;
      for (int64_t j = 0; j < 12; ++j) mu += xv[row * 12 + j] / 12;
      for (int64_t j = 0; j < 12; ++j) var += (xv[row * 12 + j] - mu) * (xv[row * 12 + j] - mu) / 12;
      const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
      EXPECT_NEAR(mean[row], mu, tol);
      EXPECT_NEAR(rstd[row], 1 / std::sqrt(var + 1e-5), tol * 10);
      for (int64_t j = 0; j < 12; ++j) {
        double expect = (xv[row * 12 + j] - mu) / std::sqrt(var + 1e-5) * wv[j] + bv[j];
        EXPECT_NEAR(y[row * 12 + j], expect, tol * 10) << row << "," << j;
      }
    }
  }
}

TEST(LayerNorm, WithoutAffineRowsHaveZeroMeanUnitVariance) {
  Generator gen(12);
  Tensor x = randn({5, 8}, {.dtype = DType::F64}, &gen) * 3.0 + 7.0;
  std::vector<double> y = kernels::layer_norm(x, {8}, Tensor(), Tensor(), 0.0).y.to_vector<double>();
  for (int r = 0; r < 5; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 8; ++j) m += y[r * 8 + j] / 8;
    for (int j = 0; j < 8; ++j) v += (y[r * 8 + j] - m) * (y[r * 8 + j] - m) / 8;
    EXPECT_NEAR(m, 0.0, 1e-12);
    EXPECT_NEAR(v, 1.0, 1e-12);
  }
}

TEST(LayerNorm, HalfPrecisionAgreesWithFloat) {
  Generator gen(13);
  Tensor x = randn({4, 16}, {}, &gen), w = randn({16}, {}, &gen), b = randn({16}, {}, &gen);
  std::vector<float> ref = kernels::layer_norm(x, {16}, w, b, 1e-5).y.to_vector<float>();
  for (DType dt : {DType::F16, DType::BF16}) {
    kernels::LayerNormResult r = kernels::layer_norm(x.to(dt), {16}, w.to(dt), b.to(dt), 1e-5);
    EXPECT_EQ(r.y.dtype(), dt);
    EXPECT_EQ(r.mean.dtype(), DType::F32);
    std::vector<float> got = r.y.to_vector<float>();
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(got[i], ref[i], 0.05 * (1 + std::abs(ref[i]))) << dtype_name(dt);
  }
}

// --- batch norm --------------------------------------------------------------------------

namespace {
// Per-channel mean and biased variance of x: (N, C, S), written out.
void channel_stats(const std::vector<double>& x, int64_t N, int64_t C, int64_t S, int64_t c, double& mean,
                   double& var) {
  mean = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) mean += x[(n * C + c) * S + s] / static_cast<double>(N * S);
  var = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      const double d = x[(n * C + c) * S + s] - mean;
      var += d * d / static_cast<double>(N * S);
    }
}
}  // namespace

TEST(BatchNorm, TrainingNormalisesChannelsAndUpdatesRunningStats) {
  Generator gen(21);
  const int64_t N = 4, C = 3, S = 6;
  Tensor x = randn({N, C, 2, 3}, {.dtype = DType::F64}, &gen) * 2.0 + 1.0;
  Tensor w = randn({C}, {.dtype = DType::F64}, &gen), b = randn({C}, {.dtype = DType::F64}, &gen);
  Tensor rm = randn({C}, {.dtype = DType::F64}, &gen), rv = rand({C}, {.dtype = DType::F64}, &gen) + 0.5;
  const std::vector<double> rm0 = rm.to_vector<double>(), rv0 = rv.to_vector<double>();
  kernels::BatchNormResult r = kernels::batch_norm(x, w, b, rm, rv, /*training=*/true, 0.2, 1e-5);
  const std::vector<double> xv = x.to_vector<double>(), y = r.y.to_vector<double>(), wv = w.to_vector<double>(),
                            bv = b.to_vector<double>(), sm = r.save_mean.to_vector<double>(),
                            si = r.save_invstd.to_vector<double>(), rm1 = rm.to_vector<double>(),
                            rv1 = rv.to_vector<double>();
  EXPECT_EQ(r.y.sizes(), x.sizes());
  for (int64_t c = 0; c < C; ++c) {
    double mean, var;
    channel_stats(xv, N, C, S, c, mean, var);
    EXPECT_NEAR(sm[c], mean, 1e-12);
    EXPECT_NEAR(si[c], 1 / std::sqrt(var + 1e-5), 1e-10);
    EXPECT_NEAR(rm1[c], 0.8 * rm0[c] + 0.2 * mean, 1e-12);
    EXPECT_NEAR(rv1[c], 0.8 * rv0[c] + 0.2 * var * (N * S) / (N * S - 1), 1e-12) << "unbiased running variance";
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        EXPECT_NEAR(y[i], (xv[i] - mean) / std::sqrt(var + 1e-5) * wv[c] + bv[c], 1e-10);
      }
  }
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor rm = from_vector<float>({1, -1}, {2}), rv = from_vector<float>({4, 0.25f}, {2});
  kernels::BatchNormResult r = kernels::batch_norm(x, Tensor(), Tensor(), rm, rv, /*training=*/false, 0.1, 0.0);
  EXPECT_EQ(r.y.to_vector<float>(), (std::vector<float>{0.0f, 6.0f, 1.0f, 10.0f}));
  EXPECT_EQ(rm.to_vector<float>(), (std::vector<float>{1, -1}));
  EXPECT_EQ(rv.to_vector<float>(), (std::vector<float>{4, 0.25f}));
}

TEST(BatchNorm, StridedRunningStatsAreUpdatedInPlace) {
  Tensor x = from_vector<double>({1, 5, 3, 7}, {2, 2});
  Tensor buf = zeros({4}, {.dtype = DType::F64});
  Tensor rm = buf.as_strided({2}, {2}, 0), rv = ones({2}, {.dtype = DType::F64});
  kernels::batch_norm(x, Tensor(), Tensor(), rm, rv, /*training=*/true, 0.5, 1e-5);
  EXPECT_EQ(buf.to_vector<double>(), (std::vector<double>{1.0, 0.0, 3.0, 0.0}));
}

TEST(BatchNorm, BadArgumentsThrowNamingTheOp) {
  Tensor x = randn({4, 3});
  expect_error([&] { kernels::batch_norm(randn({4}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
               "batch_norm: input must be (N, C, ...)");
  expect_error([&] { kernels::batch_norm(x, ones({2}), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
               "batch_norm: weight [2] must have shape [3]");
  expect_error([&] { kernels::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false, 0.1, 1e-5); },
               "batch_norm: eval mode needs running_mean and running_var");
  expect_error(
      [&] {
        kernels::batch_norm(randn({1, 3}), Tensor(), Tensor(), zeros({3}), ones({3}), true, 0.1, 1e-5);
      },
      "expected more than 1 value per channel");
}

// --- dropout -------------------------------------------------------------------------------

TEST(Dropout, SameSeedGivesSameMaskAndDifferentSeedsDiffer) {
  Tensor x = ones({1000});
  Generator g1(42), g2(42), g3(43);
  std::vector<float> a = kernels::dropout(x, 0.3, &g1).y.to_vector<float>();
  std::vector<float> b = kernels::dropout(x, 0.3, &g2).y.to_vector<float>();
  std::vector<float> c = kernels::dropout(x, 0.3, &g3).y.to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The generator advances: a second draw differs from the first.
  EXPECT_NE(kernels::dropout(x, 0.3, &g1).y.to_vector<float>(), a);
}

TEST(Dropout, DropsAboutPAndScalesKeptValues) {
  const int64_t n = 200000;
  Generator gen(5);
  Tensor x = full({n}, 2.0, {.dtype = DType::F64});
  kernels::DropoutResult r = kernels::dropout(x, 0.25, &gen);
  std::vector<double> y = r.y.to_vector<double>();
  std::vector<bool> m;
  for (bool v : r.mask.to_vector<bool>()) m.push_back(v);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (m[i]) {
      EXPECT_DOUBLE_EQ(y[i], 2.0 / 0.75);
    } else {
      EXPECT_EQ(y[i], 0.0);
      ++dropped;
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.01);
}

TEST(Dropout, EvalModeAndZeroPAreIdentityAndPOneGivesZeros) {
  Tensor x = randn({3, 4});
  EXPECT_TRUE(brisk::dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(brisk::dropout(x, 0.0).is_same(x));
  std::vector<float> z = brisk::dropout(x, 1.0).to_vector<float>();
  for (float v : z) EXPECT_EQ(v, 0.0f);
}

// --- cross entropy / nll ---------------------------------------------------------------------

namespace {
// The formula, written out for (N, C) logits: per row, lse = log sum_c exp(z_c);
// loss = (1 - e) * (lse - z_t) + e / C * sum_c (lse - z_c); ignored rows give 0.
std::vector<double> ce_rows(const std::vector<std::vector<double>>& z, const std::vector<int64_t>& t, double e,
                            int64_t ignore) {
  std::vector<double> out;
  for (size_t n = 0; n < z.size(); ++n) {
    if (t[n] == ignore) {
      out.push_back(0.0);
      continue;
    }
    const double C = static_cast<double>(z[n].size());
    double se = 0;
    for (double v : z[n]) se += std::exp(v);
    const double lse = std::log(se);
    double smooth = 0;
    for (double v : z[n]) smooth += lse - v;
    out.push_back((1 - e) * (lse - z[n][t[n]]) + e / C * smooth);
  }
  return out;
}
}  // namespace

TEST(CrossEntropy, MatchesFormulaForEveryReduction) {
  std::vector<std::vector<double>> z = {{1.0, 2.0, 0.5}, {-1.0, 0.0, 3.0}, {0.2, 0.2, 0.2}};
  std::vector<int64_t> t = {0, 2, 1};
  Tensor logits = from_vector<double>({1.0, 2.0, 0.5, -1.0, 0.0, 3.0, 0.2, 0.2, 0.2}, {3, 3});
  Tensor targets = from_vector<int64_t>(t, {3});
  std::vector<double> rows = ce_rows(z, t, 0.0, -100);
  // Row 0 by hand: log(e^1 + e^2 + e^0.5) - 1.
  EXPECT_NEAR(rows[0], std::log(std::exp(1.0) + std::exp(2.0) + std::exp(0.5)) - 1.0, 1e-15);
  EXPECT_NEAR(rows[2], std::log(3.0), 1e-15);  // uniform logits
  std::vector<double> none = cross_entropy(logits, targets, {.reduction = Reduction::None}).to_vector<double>();
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(none[i], rows[i], 1e-12);
  EXPECT_NEAR(cross_entropy(logits, targets, {.reduction = Reduction::Sum}).item<double>(), rows[0] + rows[1] + rows[2],
              1e-12);
  EXPECT_NEAR(cross_entropy(logits, targets).item<double>(), (rows[0] + rows[1] + rows[2]) / 3, 1e-12);
}

TEST(CrossEntropy, LabelSmoothingAndIgnoreIndexFollowPyTorch) {
  std::vector<std::vector<double>> z = {{1.0, 2.0, 0.5}, {-1.0, 0.0, 3.0}, {0.3, -0.2, 0.9}};
  std::vector<int64_t> t = {0, -1, 1};
  Tensor logits = from_vector<double>({1.0, 2.0, 0.5, -1.0, 0.0, 3.0, 0.3, -0.2, 0.9}, {3, 3});
  Tensor targets = from_vector<int64_t>(t, {3});
  std::vector<double> rows = ce_rows(z, t, 0.1, -1);
  // Mean divides by the number of non-ignored targets (2), not by N (3).
  Tensor mean = cross_entropy(logits, targets, {.ignore_index = -1, .label_smoothing = 0.1});
  EXPECT_NEAR(mean.item<double>(), (rows[0] + rows[2]) / 2, 1e-12);
  std::vector<double> none =
      cross_entropy(logits, targets, {.ignore_index = -1, .label_smoothing = 0.1, .reduction = Reduction::None})
          .to_vector<double>();
  EXPECT_EQ(none[1], 0.0);
  EXPECT_NEAR(none[0], rows[0], 1e-12);
  EXPECT_NEAR(none[2], rows[2], 1e-12);
  // All targets ignored: mean is 0 / 0 = NaN, as in PyTorch.
  Tensor all_ignored = from_vector<int64_t>({-1, -1, -1}, {3});
  EXPECT_TRUE(std::isnan(cross_entropy(logits, all_ignored, {.ignore_index = -1}).item<double>()));
}

TEST(CrossEntropy, SpatialLogitsUseClassDimOne) {
  Generator gen(8);
  Tensor logits = randn({2, 3, 4}, {.dtype = DType::F64}, &gen);  // (N, C, d)
  Tensor targets = from_vector<int64_t>({0, 1, 2, 1, 2, 2, 0, 1}, {2, 4});
  std::vector<double> zv = logits.to_vector<double>();
  std::vector<int64_t> tv = targets.to_vector<int64_t>();
  std::vector<std::vector<double>> z;
  for (int n = 0; n < 2; ++n)
    for (int d = 0; d < 4; ++d) z.push_back({zv[n * 12 + 0 * 4 + d], zv[n * 12 + 1 * 4 + d], zv[n * 12 + 2 * 4 + d]});
  std::vector<double> rows = ce_rows(z, tv, 0.2, -100);
  std::vector<double> got =
      cross_entropy(logits, targets, {.label_smoothing = 0.2, .reduction = Reduction::None}).to_vector<double>();
  ASSERT_EQ(got.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(got[i], rows[i], 1e-12);
}

TEST(CrossEntropy, HalfPrecisionAgreesWithFloat) {
  Generator gen(9);
  Tensor logits = randn({16, 10}, {}, &gen);
  Tensor targets = randint(0, 10, {16}, {.dtype = DType::I64}, &gen);
  double ref = cross_entropy(logits, targets).item<double>();
  EXPECT_NEAR(cross_entropy(logits.to(DType::F16), targets).item<double>(), ref, 1e-2);
  EXPECT_NEAR(cross_entropy(logits.to(DType::BF16), targets).item<double>(), ref, 3e-2);
  EXPECT_NEAR(cross_entropy(logits, targets.to(DType::I32)).item<double>(), ref, 1e-6);
}

TEST(NllLoss, PicksNegativeLogProbOfTarget) {
  Tensor lp = from_vector<double>({-0.1, -2.0, -3.0, -1.5, -0.5, -4.0}, {2, 3});
  Tensor t = from_vector<int64_t>({1, 0}, {2});
  EXPECT_NEAR(nll_loss(lp, t).item<double>(), (2.0 + 1.5) / 2, 1e-15);
  EXPECT_NEAR(nll_loss(lp, t, {.reduction = Reduction::Sum}).item<double>(), 3.5, 1e-15);
  Tensor ti = from_vector<int64_t>({1, -100}, {2});
  EXPECT_NEAR(nll_loss(lp, ti).item<double>(), 2.0, 1e-15);
}

TEST(NnErrors, BadArgumentsThrowNamingTheOp) {
  Tensor logits = zeros({2, 3});
  expect_error(
      [&] {
        kernels::cross_entropy(logits, tensor<int64_t>({0, 3}), -100, 0, Reduction::Mean);
      },
      "cross_entropy");  // target out of range
  expect_error(
      [&] {
        kernels::cross_entropy(logits, tensor<int64_t>({0, -1}), -100, 0, Reduction::Mean);
      },
      "cross_entropy");  // negative target that is not ignore_index
  expect_error([&] { cross_entropy(logits, tensor<float>({0, 1})); }, "cross_entropy");       // float targets
  expect_error([&] { cross_entropy(logits, tensor<int64_t>({0, 1, 2})); }, "cross_entropy");  // N mismatch
  // A reduction spelled by a user (a flag, a config file) is parsed once, naming the valid ones.
  expect_error([&] { (void)parse_enum<Reduction>("avg", "cross_entropy: reduction"); },
               "cross_entropy: reduction: 'avg' is not valid; expected one of: none, mean, sum");
  expect_error([&] { cross_entropy(logits, tensor<int64_t>({0, 1}), {.label_smoothing = 1.5}); }, "cross_entropy");
  expect_error([&] { nll_loss(logits, tensor<int64_t>({0, 1}), {.label_smoothing = 0.1}); }, "nll_loss");
  expect_error([&] { brisk::dropout(ones({3}), 1.5); }, "dropout");
  expect_error([&] { brisk::dropout(ones({3}), -0.1); }, "dropout");
  expect_error([&] { kernels::embedding(tensor<int64_t>({5}), zeros({3, 2})); }, "embedding");
  expect_error([&] { kernels::embedding(tensor<float>({1}), zeros({3, 2})); }, "embedding");
  expect_error([&] { layer_norm(zeros({2, 3}), {4}); }, "layer_norm");
  expect_error([&] { layer_norm(zeros({2, 3}), {3}, zeros({4})); }, "layer_norm");
  expect_error([&] { mse_loss(zeros({2, 3}), zeros({3})); }, "mse_loss");
  expect_error([&] { binary_cross_entropy_with_logits(zeros({2}), zeros({3})); }, "binary_cross_entropy_with_logits");
}
