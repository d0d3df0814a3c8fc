// Reduction, softmax, cumsum and topk kernels against naive loops and hand-computed values,
// in every layout, for 16-bit inputs, across thread counts, and with bad arguments.
#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/reduce.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;
namespace K = brisk::kernels;

namespace {

using Group = std::vector<double>;
using Stat = std::function<double(const Group&)>;

// Naive reference: the input's values grouped by output element (in C order of the reduced
// dims), reduced by `stat`. x is read element by element through its logical index.
std::vector<double> naive_reduce(const Tensor& x, const std::vector<int64_t>& dims, const Stat& stat) {
  const int64_t nd = x.dim();
  std::vector<bool> red(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  Shape out_sizes;
  for (int64_t d = 0; d < nd; ++d)
    if (!red[d]) out_sizes.push_back(x.size(d));
  std::vector<Group> groups(static_cast<size_t>(shape_numel(out_sizes)));
  std::vector<double> v = x.to_vector<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int64_t d = nd - 1, od = static_cast<int64_t>(out_sizes.size()) - 1; d >= 0; --d) {
      const int64_t idx = rem % x.size(d);
      rem /= x.size(d);
      if (!red[d]) {
        o += idx * mul;
        mul *= out_sizes[od--];
      }
    }
    groups[o].push_back(v[i]);
  }
  std::vector<double> r;
  r.reserve(groups.size());
  for (const Group& g : groups) r.push_back(stat(g));
  return r;
}

double g_sum(const Group& g) {
  return std::accumulate(g.begin(), g.end(), 0.0);
}
double g_mean(const Group& g) {
  return g_sum(g) / static_cast<double>(g.size());
}
double g_max(const Group& g) {
  return *std::max_element(g.begin(), g.end());
}
double g_min(const Group& g) {
  return *std::min_element(g.begin(), g.end());
}
double g_prod(const Group& g) {
  return std::accumulate(g.begin(), g.end(), 1.0, std::multiplies<>());
}
double g_var(const Group& g, double c) {
  double m = g_mean(g), ss = 0;
  for (double v : g) ss += (v - m) * (v - m);
  return ss / (static_cast<double>(g.size()) - c);
}
double g_lse(const Group& g) {
  double s = 0;
  for (double v : g) s += std::exp(v);
  return std::log(s);
}

void expect_close(const Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
}

// Values of t in a strided layout: a transposed view of a contiguous buffer.
Tensor strided_copy(const Tensor& t) {
  Shape rev(t.sizes().rbegin(), t.sizes().rend());
  Tensor buf = empty(rev, t.dtype());
  std::vector<int64_t> perm(static_cast<size_t>(t.dim()));
  std::iota(perm.rbegin(), perm.rend(), 0);
  Tensor view = buf.permute(perm).detach();
  K::copy_(view, t);
  EXPECT_FALSE(view.is_contiguous());
  return view;
}

const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {2}, {0, 2}, {-1, 0}, {1, 2}, {0, 1, 2}};

std::string dims_str(const std::vector<int64_t>& d) {
  return detail::str_cat(d);
}

}  // namespace

TEST(Reduce, EveryReductionMatchesNaiveLoopsForEveryDimSetAndLayout) {
  Generator gen(7);
  Tensor base = randn({3, 4, 5}, {.dtype = DType::F64}, &gen);
  for (const Tensor& x : {base, strided_copy(base)}) {
    const std::string layout = x.is_contiguous() ? "contiguous" : "strided";
    for (const auto& dims : kDimSets) {
      for (bool keepdim : {false, true}) {
        const std::string what = layout + " dims " + dims_str(dims) + (keepdim ? " keepdim" : "");
        expect_close(K::sum(x, dims, keepdim), naive_reduce(x, dims, g_sum), 1e-12, "sum " + what);
        expect_close(K::mean(x, dims, keepdim), naive_reduce(x, dims, g_mean), 1e-12, "mean " + what);
        expect_close(K::prod(x, dims, keepdim), naive_reduce(x, dims, g_prod), 1e-12, "prod " + what);
        expect_close(K::amax(x, dims, keepdim), naive_reduce(x, dims, g_max), 0, "amax " + what);
        expect_close(K::amin(x, dims, keepdim), naive_reduce(x, dims, g_min), 0, "amin " + what);
        expect_close(K::logsumexp(x, dims, keepdim), naive_reduce(x, dims, g_lse), 1e-12, "logsumexp " + what);
        for (int64_t c : {0, 1}) {
          auto var = [c](const Group& g) { return g_var(g, static_cast<double>(c)); };
          auto sd = [c](const Group& g) { return std::sqrt(g_var(g, static_cast<double>(c))); };
          expect_close(K::var(x, dims, c, keepdim), naive_reduce(x, dims, var), 1e-12, "var " + what);
          expect_close(K::std(x, dims, c, keepdim), naive_reduce(x, dims, sd), 1e-12, "std " + what);
        }
      }
    }
  }
}

TEST(Reduce, KeepdimKeepsReducedDimsAsOnes) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_EQ(K::sum(x, {0, 2}, true).sizes(), (Shape{1, 3, 1}));
  EXPECT_EQ(K::sum(x, {0, 2}, false).sizes(), (Shape{3}));
  EXPECT_EQ(K::sum(x, {}, true).sizes(), (Shape{1, 1, 1}));
  EXPECT_EQ(K::sum(x, {}, false).sizes(), (Shape{}));
  EXPECT_EQ(K::amax(x, {-1}, false).sizes(), (Shape{2, 3}));
}

TEST(Reduce, SumOverLeadingDimMatchesNaiveColumnSums) {
  // The bias-gradient shape: (N, C) summed over N, C not a multiple of the block width.
  Generator gen(3);
  Tensor x = randn({37, 150}, {}, &gen);
  std::vector<float> v = x.to_vector<float>();
  std::vector<double> want(150, 0.0);
  for (int64_t n = 0; n < 37; ++n)
    for (int64_t c = 0; c < 150; ++c) want[c] += v[n * 150 + c];
  expect_close(K::sum(x, {0}), want, 1e-6, "sum over dim 0");
  expect_close(K::sum(strided_copy(x), {0}), want, 1e-6, "sum over dim 0 of a transposed layout");
}

TEST(Reduce, SumOfAnEmptyDimIsZeroAndMeanIsNaN) {
  Tensor x = zeros({0, 3});
  EXPECT_EQ(K::sum(x, {0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(K::mean(x, {0}).to_vector<float>()[0]));
}

TEST(Reduce, IntegerAndBoolSumsGiveI64) {
  Tensor i = tensor<int32_t>({2000000000, 2000000000, 5});
  Tensor s = K::sum(i, {});
  EXPECT_EQ(s.dtype(), DType::I64);
  EXPECT_EQ(s.item<int64_t>(), 4000000005);
  Tensor b = tensor<bool>({true, false, true, true});
  EXPECT_EQ(K::sum(b, {}).dtype(), DType::I64);
  EXPECT_EQ(K::sum(b, {}).item<int64_t>(), 3);
  EXPECT_EQ(K::prod(tensor<int32_t>({2, 3, 4}), {}).item<int64_t>(), 24);
}

TEST(Reduce, MaxAlongDimReturnsValuesAndFirstIndexOfTies) {
  Tensor x = from_vector<float>({1, 5, 5, 2,  //
                                 7, 0, 7, 7},
                                {2, 4});
  auto [v, i] = K::max(x, 1);
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  auto [v0, i0] = K::min(x, 0, /*keepdim=*/true);
  EXPECT_EQ(v0.sizes(), (Shape{1, 4}));
  EXPECT_EQ(v0.to_vector<float>(), (std::vector<float>{1, 0, 5, 2}));
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 0}));
}

TEST(Reduce, ArgmaxWithoutDimIndexesTheFlattenedTensor) {
  Tensor x = from_vector<float>({1, 9, 3, -4, 9, 0}, {2, 3});
  EXPECT_EQ(K::argmax(x).item<int64_t>(), 1);
  EXPECT_EQ(K::argmin(x).item<int64_t>(), 3);
  EXPECT_EQ(K::argmax(x, std::nullopt, true).sizes(), (Shape{1, 1}));
  EXPECT_EQ(K::argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(K::argmin(x, -1).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  // Transposed view: indices are along the view's dims.
  EXPECT_EQ(K::argmin(x.t().detach(), 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
}

TEST(Reduce, NaNWinsInMaxAndMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector<float>({1, nan, 3, 2, 1, 0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {18});
  EXPECT_TRUE(std::isnan(K::amax(x, {}).item<float>()));
  EXPECT_TRUE(std::isnan(K::amin(x, {}).item<float>()));
  auto [v, i] = K::max(x, 0);
  EXPECT_TRUE(std::isnan(v.item<float>()));
  EXPECT_EQ(i.item<int64_t>(), 1);
}

TEST(Reduce, IntegerMaxKeepsTheDtype) {
  Tensor x = from_vector<int64_t>({-5, 3, 7, 2}, {2, 2});
  EXPECT_EQ(K::amax(x, {1}).dtype(), DType::I64);
  EXPECT_EQ(K::amax(x, {1}).to_vector<int64_t>(), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(K::amin(x, {}).item<int64_t>(), -5);
}

TEST(Reduce, VarAndStdUseTheCorrection) {
  Tensor x = tensor<float>({1, 2, 3, 4});  // mean 2.5, squared deviations sum to 5
  EXPECT_FLOAT_EQ(K::var(x, {}).item<float>(), 5.f / 3.f);
  EXPECT_FLOAT_EQ(K::var(x, {}, 0).item<float>(), 5.f / 4.f);
  EXPECT_FLOAT_EQ(K::std(x, {}, 0).item<float>(), std::sqrt(5.f / 4.f));
  EXPECT_TRUE(std::isnan(K::var(tensor<float>({3}), {}).item<float>()));  // 0 / 0, as PyTorch
  // A large offset does not hurt the two-pass algorithm.
  Tensor big = tensor<float>({1e6f + 1, 1e6f + 2, 1e6f + 3, 1e6f + 4});
  EXPECT_NEAR(K::var(big, {}).item<float>(), 5.f / 3.f, 1e-5);
}

TEST(Reduce, LogsumexpIsStableForLargeAndInfiniteValues) {
  Tensor x = tensor<float>({1000, 1000});
  EXPECT_NEAR(K::logsumexp(x, {}).item<float>(), 1000 + std::log(2.f), 1e-3);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(K::logsumexp(tensor<float>({-inf, -inf}), {}).item<float>(), -inf);
  EXPECT_EQ(K::logsumexp(tensor<float>({inf, 1}), {}).item<float>(), inf);
}

TEST(Cumsum, RunsAlongEachDimAndInReverse) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(K::cumsum(x, 1).to_vector<float>(), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(K::cumsum(x, 0).to_vector<float>(), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(K::cumsum(x, -1, true).to_vector<float>(), (std::vector<float>{6, 5, 3, 15, 11, 6}));
  EXPECT_EQ(K::cumsum(x.t().detach(), 1).to_vector<float>(), (std::vector<float>{1, 5, 2, 7, 3, 9}));
  Tensor i = K::cumsum(tensor<int32_t>({1, 2, 3}), 0);
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 6}));
}

TEST(Cumsum, MatchesNaiveLoopsAlongAMiddleDim) {
  Generator gen(5);
  Tensor x = randn({3, 6, 70}, {.dtype = DType::F64}, &gen);
  std::vector<double> v = x.to_vector<double>(), want(v.size());
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t c = 0; c < 70; ++c) {
      double s = 0;
      for (int64_t b = 0; b < 6; ++b) want[(a * 6 + b) * 70 + c] = s += v[(a * 6 + b) * 70 + c];
    }
  expect_close(K::cumsum(x, 1), want, 1e-12, "cumsum dim 1");
}

TEST(Topk, ReturnsLargestOrSmallestWithIndices) {
  Tensor x = from_vector<float>({3, 1, 4, 1, 5, 9, 2, 6}, {2, 4});
  auto [v, i] = K::topk(x, 2);
  EXPECT_EQ(v.sizes(), (Shape{2, 2}));
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{4, 3, 9, 6}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 1, 3}));
  auto [vs, is] = K::topk(x, 3, 1, /*largest=*/false);
  EXPECT_EQ(vs.to_vector<float>(), (std::vector<float>{1, 1, 3, 2, 5, 6}));
  EXPECT_EQ(is.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2, 0, 3}));  // ties: lower index first
  auto [v0, i0] = K::topk(x, 1, 0);
  EXPECT_EQ(v0.to_vector<float>(), (std::vector<float>{5, 9, 4, 6}));
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 1}));
}

TEST(Topk, UnsortedReturnsTheSameSetInIndexOrder) {
  Tensor x = tensor<float>({3, 1, 4, 1, 5, 9, 2, 6});
  auto [v, i] = K::topk(x, 3, 0, true, /*sorted=*/false);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 7}));
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{5, 9, 6}));
}

TEST(Topk, MatchesAFullSortForSmallAndLargeKWithTiesAndNaN) {
  // Integer-valued floats so that ties are common; one NaN, which counts as the largest value.
  Generator gen(19);
  std::vector<float> v = K::cast(randint(0, 20, {200}, {.dtype = DType::I64}, &gen), DType::F32).to_vector<float>();
  v[17] = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector<float>(v, {200});
  for (bool largest : {true, false}) {
    std::vector<int64_t> order(200);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const bool an = std::isnan(v[a]), bn = std::isnan(v[b]);
      if (an != bn) return largest ? an : bn;
      return largest ? v[a] > v[b] : v[a] < v[b];
    });
    for (int64_t k : {0, 1, 5, 16, 17, 60, 200}) {
      auto [vals, idx] = K::topk(x, k, 0, largest);
      std::vector<int64_t> want(order.begin(), order.begin() + k);
      EXPECT_EQ(idx.to_vector<int64_t>(), want) << "k " << k << (largest ? " largest" : " smallest");
    }
  }
}

TEST(Softmax, F32MatchesAnF64ReferenceClosely) {
  Generator gen(23);
  Tensor x = K::binary_scalar(K::BinaryOp::Mul, randn({8, 300}, {}, &gen), 10.0);
  std::vector<float> got = K::softmax(x, 1).to_vector<float>(), got_log = K::log_softmax(x, 1).to_vector<float>();
  std::vector<double> want = K::softmax(K::cast(x, DType::F64), 1).to_vector<double>();
  std::vector<double> want_log = K::log_softmax(K::cast(x, DType::F64), 1).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    // f32 rounds x - max (relative error up to 2^-24 |x - max|), which exp turns into a relative error.
    EXPECT_NEAR(got[i], want[i], (1e-6 + 1e-7 * std::abs(std::log(want[i]))) * want[i] + 1e-37) << i;
    EXPECT_NEAR(got_log[i], want_log[i], 1e-5 * (1 + std::abs(want_log[i]))) << i;
  }
}

TEST(Softmax, HandlesUnderflowInfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(K::softmax(tensor<float>({0, -200}), 0).to_vector<float>(), (std::vector<float>{1, 0}));
  EXPECT_EQ(K::softmax(tensor<float>({-inf, 0}), 0).to_vector<float>(), (std::vector<float>{0, 1}));
  EXPECT_EQ(K::log_softmax(tensor<float>({-inf, 0}), 0).to_vector<float>(), (std::vector<float>{-inf, 0}));
  for (float y : K::softmax(tensor<float>({1, nan, 2}), 0).to_vector<float>()) EXPECT_TRUE(std::isnan(y));
}

TEST(Softmax, MatchesNaiveLoopsAlongEveryDim) {
  Generator gen(11);
  Tensor base = randn({3, 4, 70}, {.dtype = DType::F64}, &gen);
  for (const Tensor& x : {base, strided_copy(base)}) {
    std::vector<double> v = x.to_vector<double>();
    for (int64_t dim = 0; dim < 3; ++dim) {
      // naive: for each element, exp(x) / sum over its line along dim
      std::vector<double> want(v.size()), want_log(v.size());
      const int64_t st = dim == 0 ? 280 : dim == 1 ? 70 : 1, n = x.size(dim);
      for (int64_t e = 0; e < x.numel(); ++e) {
        const int64_t pos = (e / st) % n, start = e - pos * st;
        double s = 0;
        for (int64_t k = 0; k < n; ++k) s += std::exp(v[start + k * st]);
        want[e] = std::exp(v[e]) / s;
        want_log[e] = v[e] - std::log(s);
      }
      expect_close(K::softmax(x, dim), want, 1e-12, "softmax dim " + std::to_string(dim));
      expect_close(K::log_softmax(x, dim - 3), want_log, 1e-12, "log_softmax dim " + std::to_string(dim));
    }
  }
}

TEST(Softmax, IsStableForLargeLogits) {
  Tensor x = tensor<float>({1000, 1001, 1002});
  std::vector<float> y = K::softmax(x, 0).to_vector<float>();
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(y[0], 1 / z, 1e-6);
  EXPECT_NEAR(y[2], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(K::log_softmax(x, 0).to_vector<float>()[0], -std::log(z), 1e-5);
}

TEST(Softmax, BackwardMatchesTheClosedForm) {
  Tensor y = K::softmax(tensor<double>({0.5, -1.0, 2.0}), 0);
  Tensor g = tensor<double>({1.0, 2.0, -1.0});
  std::vector<double> yv = y.to_vector<double>(), gv = g.to_vector<double>();
  const double dot = yv[0] * gv[0] + yv[1] * gv[1] + yv[2] * gv[2];
  std::vector<double> want;
  want.reserve(3);
  for (int k = 0; k < 3; ++k) want.push_back(yv[k] * (gv[k] - dot));
  expect_close(K::softmax_backward(g, y, 0), want, 1e-14, "softmax_backward");
  Tensor ly = K::log_softmax(tensor<double>({0.5, -1.0, 2.0}), 0);
  std::vector<double> lv = ly.to_vector<double>(), want_log;
  for (int k = 0; k < 3; ++k) want_log.push_back(gv[k] - std::exp(lv[k]) * 2.0);
  expect_close(K::log_softmax_backward(g, ly, 0), want_log, 1e-14, "log_softmax_backward");
}

TEST(TakeAlongDimBackward, ScattersGradIntoAZeroTensor) {
  Tensor g = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor idx = from_vector<int64_t>({2, 0, 1, 1}, {2, 2});
  Tensor out = K::take_along_dim_backward(g, idx, 1, {2, 3});
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{2, 0, 1, 0, 7, 0}));
}

TEST(Reduce, HalfAndBFloat16InputsMatchF32Within1e2) {
  Generator gen(13);
  Tensor x32 = randn({4, 33, 50}, {}, &gen);
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor x16 = K::cast(x32, dt);
    Tensor ref = K::cast(x16, DType::F32);  // the same rounded inputs, reduced in f32
    auto check = [&](const char* what, const Tensor& got, const Tensor& want) {
      EXPECT_EQ(got.dtype(), dt) << what;
      std::vector<float> a = got.to_vector<float>(), b = want.to_vector<float>();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_NEAR(a[i], b[i], 1e-2 * (std::abs(b[i]) + 1e-1)) << what << " " << dtype_name(dt) << " " << i;
    };
    check("sum", K::sum(x16, {1}), K::sum(ref, {1}));
    check("sum all", K::sum(x16, {}), K::sum(ref, {}));
    check("mean", K::mean(x16, {0, 2}), K::mean(ref, {0, 2}));
    check("amax", K::amax(x16, {2}), K::amax(ref, {2}));
    check("var", K::var(x16, {2}), K::var(ref, {2}));
    check("std", K::std(x16, {0}), K::std(ref, {0}));
    check("logsumexp", K::logsumexp(x16, {1}), K::logsumexp(ref, {1}));
    check("softmax", K::softmax(x16, -1), K::softmax(ref, -1));
    check("softmax dim 1", K::softmax(x16, 1), K::softmax(ref, 1));
    check("log_softmax", K::log_softmax(x16, -1), K::log_softmax(ref, -1));
    check("cumsum", K::cumsum(x16, 2), K::cumsum(ref, 2));
    check("topk", K::topk(x16, 5).values, K::topk(ref, 5).values);
    check("max", K::max(x16, 1).values, K::max(ref, 1).values);
  }
}

TEST(Reduce, ResultsDoNotDependOnTheThreadCount) {
  Generator gen(17);
  Tensor x = randn({300, 700}, {}, &gen);
  Tensor xt = strided_copy(x);
  auto run_all = [&] {
    return std::vector<Tensor>{K::sum(x, {}),      K::sum(x, {0}),   K::sum(x, {1}),          K::sum(xt, {0}),
                               K::mean(x, {0, 1}), K::var(x, {0}),   K::std(x, {1}),          K::logsumexp(x, {1}),
                               K::amax(x, {0}),    K::softmax(x, 1), K::softmax(x, 0),        K::log_softmax(x, 1),
                               K::cumsum(x, 0),    K::cumsum(x, 1),  K::topk(x, 7, 1).values, K::max(x, 0).indices,
                               K::prod(x, {0})};
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Tensor> one = run_all();
  omp_set_num_threads(2);
  std::vector<Tensor> two = run_all();
  omp_set_num_threads(saved);
  for (size_t k = 0; k < one.size(); ++k) {
    ASSERT_EQ(one[k].nbytes(), two[k].nbytes());
    EXPECT_EQ(0, std::memcmp(one[k].data_ptr(), two[k].data_ptr(), one[k].nbytes())) << "result " << k;
  }
}

TEST(ReduceErrors, BadArgumentsThrowNamingTheOpAndShape) {
  Tensor x = zeros({2, 3});
  expect_error([&] { K::sum(x, {2}); }, "sum: dim 2 out of range for input of shape [2, 3]");
  expect_error([&] { K::sum(x, {1, -1}); }, "sum: dim -1 appears more than once");
  expect_error([&] { K::max(x, -3); }, "max: dim -3");
  expect_error([&] { K::topk(x, 4, 1); }, "topk: k = 4 is out of range for dim 1 of size 3 (input shape [2, 3])");
  expect_error([&] { K::topk(x, -1); }, "topk: k = -1");
  expect_error([&] { K::softmax(zeros({2, 3}, {.dtype = DType::I64}), 1); }, "softmax: expected a floating-point");
  expect_error([&] { K::log_softmax(x, 5); }, "log_softmax: dim 5");
  expect_error([&] { K::mean(zeros({2}, {.dtype = DType::I32}), {}); }, "mean: expected a floating-point");
  expect_error([&] { K::amax(zeros({0, 3}), {0}); }, "amax: cannot reduce over zero elements (input shape [0, 3])");
  expect_error([&] { K::argmax(zeros({0})); }, "argmax: cannot reduce over zero elements");
  expect_error([&] { K::var(x, {}, -1); }, "var: correction must be >= 0");
  expect_error([&] { K::cumsum(x, 2); }, "cumsum: dim 2");
  expect_error([&] { K::logsumexp(tensor<int32_t>({1}), {}); }, "logsumexp: expected a floating-point");
}
