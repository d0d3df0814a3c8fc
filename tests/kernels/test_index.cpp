// Indexing kernels: values against hand-computed cases and naive loops, determinism of the
// accumulating kernels, multinomial reproducibility and statistics, and argument errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/index.h>

#include <algorithm>
#include <set>
#include <string>
#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;
namespace k = brisk::kernels;

namespace {

std::vector<float> vals(const Tensor& t) {
  return t.to_vector<float>();
}

Tensor randn_f32(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, {}, &g);
}

// C-order flat offset of a 3-D coordinate.
int64_t at3(const Shape& s, int64_t i, int64_t j, int64_t l) {
  return (i * s[1] + j) * s[2] + l;
}

}  // namespace

TEST(Cat, JoinsAlongDimZeroAndOne) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<float>({5, 6}, {1, 2});
  Tensor c = k::cat({a, b}, 0);
  EXPECT_EQ(c.sizes(), (Shape{3, 2}));
  EXPECT_EQ(vals(c), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor d = from_vector<float>({7, 8}, {2, 1});
  Tensor e = k::cat({a, d}, -1);
  EXPECT_EQ(e.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(e), (std::vector<float>{1, 2, 7, 3, 4, 8}));
}

TEST(Cat, ReadsNonContiguousInputsAndSkipsEmptyPieces) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor at = a.as_strided({2, 2}, {1, 2}, 0);  // transpose: [[1, 3], [2, 4]]
  Tensor empty_piece = empty({0, 2});
  Tensor c = k::cat({at, empty_piece, a}, 0);
  EXPECT_EQ(vals(c), (std::vector<float>{1, 3, 2, 4, 1, 2, 3, 4}));
}

TEST(Stack, AddsANewDimAtTheFrontOrBack) {
  Tensor a = tensor<float>({1, 2, 3}), b = tensor<float>({4, 5, 6});
  Tensor s0 = k::stack({a, b}, 0);
  EXPECT_EQ(s0.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(s0), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor s1 = k::stack({a, b}, -1);
  EXPECT_EQ(s1.sizes(), (Shape{3, 2}));
  EXPECT_EQ(vals(s1), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(IndexSelect, MatchesNaiveLoopOnEveryDimWithI32AndI64Indices) {
  const Shape s{3, 4, 5};
  Tensor x = randn_f32(s, 1);
  std::vector<float> xv = vals(x);
  for (int64_t dim = 0; dim < 3; ++dim) {
    std::vector<int64_t> idx{2, 0, 2, 1};  // duplicates allowed
    for (DType dt : {DType::I64, DType::I32}) {
      Tensor index = k::cast(from_vector<int64_t>(idx, {4}), dt);
      Tensor out = k::index_select(x, dim, index);
      Shape os = s;
      os[dim] = 4;
      ASSERT_EQ(out.sizes(), os);
      std::vector<float> ov = vals(out);
      for (int64_t i = 0; i < os[0]; ++i)
        for (int64_t j = 0; j < os[1]; ++j)
          for (int64_t l = 0; l < os[2]; ++l) {
            int64_t c[3] = {i, j, l};
            c[dim] = idx[c[dim]];
            EXPECT_EQ(ov[at3(os, i, j, l)], xv[at3(s, c[0], c[1], c[2])]) << "dim " << dim;
          }
    }
  }
}

TEST(IndexSelect, WorksOnNonContiguousInput) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor xt = x.as_strided({3, 2}, {1, 3}, 0);  // [[1, 4], [2, 5], [3, 6]]
  Tensor out = k::index_select(xt, 0, tensor<int64_t>({2, 0}));
  EXPECT_EQ(vals(out), (std::vector<float>{3, 6, 1, 4}));
}

TEST(IndexAdd, AccumulatesDuplicateIndicesIntoNonContiguousDestination) {
  Tensor base = zeros({3, 2});
  Tensor dst = base.as_strided({2, 3}, {1, 2}, 0);  // transposed view of base
  Tensor src = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  k::index_add_(dst, 1, tensor<int32_t>({2, 0, 2}), src);
  // dst row 0: col0 += 2, col2 += 1 + 3; row 1: col0 += 5, col2 += 4 + 6.
  EXPECT_EQ(vals(dst), (std::vector<float>{2, 0, 4, 5, 0, 10}));
  EXPECT_EQ(vals(base), (std::vector<float>{2, 5, 0, 0, 4, 10}));
}

TEST(IndexAdd, GivesBitwiseIdenticalResultsForAnyThreadCount) {
  const int64_t V = 64, D = 4096, N = 512;
  Generator g(7);
  Tensor src = randn({N, D}, {}, &g);
  Tensor index = randint(0, V, {N}, {.dtype = DType::I64}, &g);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor one = zeros({V, D});
  k::index_add_(one, 0, index, src);
  omp_set_num_threads(std::max(2, saved));
  Tensor many = zeros({V, D});
  k::index_add_(many, 0, index, src);
  omp_set_num_threads(saved);
  EXPECT_EQ(vals(one), vals(many));
}

TEST(Gather, MatchesNaiveLoopOnEveryDimWithSmallerIndex) {
  const Shape s{3, 4, 5};
  Tensor x = randn_f32(s, 2);
  std::vector<float> xv = vals(x);
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Shape is{2, 3, 4};  // smaller than x everywhere, any size along dim is allowed
    Generator g(10 + static_cast<uint64_t>(dim));
    Tensor index = randint(0, s[dim], is, {.dtype = DType::I32}, &g);
    std::vector<int64_t> iv = index.to_vector<int64_t>();
    Tensor out = k::gather(x, dim, index);
    ASSERT_EQ(out.sizes(), is);
    std::vector<float> ov = vals(out);
    for (int64_t i = 0; i < is[0]; ++i)
      for (int64_t j = 0; j < is[1]; ++j)
        for (int64_t l = 0; l < is[2]; ++l) {
          int64_t c[3] = {i, j, l};
          c[dim] = iv[at3(is, i, j, l)];
          EXPECT_EQ(ov[at3(is, i, j, l)], xv[at3(s, c[0], c[1], c[2])]) << "dim " << dim;
        }
  }
}

TEST(Gather, PicksOneColumnPerRowLikeCrossEntropy) {
  Tensor logp = from_vector<double>({0.1, 0.2, 0.7, 0.5, 0.4, 0.1}, {2, 3});
  Tensor target = from_vector<int64_t>({2, 0}, {2, 1});
  EXPECT_EQ(k::gather(logp, 1, target).to_vector<double>(), (std::vector<double>{0.7, 0.5}));
}

TEST(Scatter, WritesSrcAtIndexedPositionsIntoACopy) {
  Tensor x = zeros({3, 4});
  Tensor src = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor index = from_vector<int64_t>({0, 1, 2, 2, 0, 1}, {2, 3});
  Tensor out = k::scatter(x, 0, index, src);
  // out[index[i][j]][j] = src[i][j]
  EXPECT_EQ(vals(out), (std::vector<float>{1, 5, 0, 0, 0, 2, 6, 0, 4, 0, 3, 0}));
  EXPECT_EQ(vals(x), std::vector<float>(12, 0.f));  // out-of-place
}

TEST(Scatter, LastWriteAlongDimWinsForDuplicateTargets) {
  Tensor x = zeros({1, 3});
  Tensor out = k::scatter(x, 1, from_vector<int64_t>({1, 1, 1}, {1, 3}), from_vector<float>({7, 8, 9}, {1, 3}));
  EXPECT_EQ(vals(out), (std::vector<float>{0, 9, 0}));
}

TEST(ScatterAdd, MatchesNaiveLoopWithDuplicates) {
  const Shape xs{4, 5, 3};
  Tensor x = randn_f32(xs, 3).to(DType::F64);
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Shape is{3, 5, 2};
    Generator g(20 + static_cast<uint64_t>(dim));
    Tensor index = randint(0, xs[dim], is, {.dtype = DType::I64}, &g);
    Tensor src = randn({4, 6, 3}, {.dtype = DType::F64}, &g);  // larger than index: only its corner is read
    Tensor out = k::scatter_add(x, dim, index, src);
    std::vector<double> want = x.to_vector<double>(), sv = src.to_vector<double>();
    std::vector<int64_t> iv = index.to_vector<int64_t>();
    for (int64_t i = 0; i < is[0]; ++i)
      for (int64_t j = 0; j < is[1]; ++j)
        for (int64_t l = 0; l < is[2]; ++l) {
          int64_t c[3] = {i, j, l};
          c[dim] = iv[at3(is, i, j, l)];
          want[at3(xs, c[0], c[1], c[2])] += sv[at3(src.sizes(), i, j, l)];
        }
    std::vector<double> got = out.to_vector<double>();
    for (size_t n = 0; n < want.size(); ++n) EXPECT_NEAR(got[n], want[n], 1e-12) << "dim " << dim;
  }
}

TEST(MaskedFill, BroadcastsTheMaskOverRows) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mask = from_vector<bool>({true, false, true}, {3});
  EXPECT_EQ(vals(k::masked_fill(x, mask, -1.5)), (std::vector<float>{-1.5f, 2, -1.5f, -1.5f, 5, -1.5f}));
}

TEST(TrilTriu, MatchNaiveLoopForSeveralDiagonalsOnBatchedNonSquareInput) {
  const Shape s{2, 3, 4};
  Tensor x = randn_f32(s, 4);
  std::vector<float> xv = vals(x);
  for (int64_t diag : {-2, -1, 0, 1, 3}) {
    std::vector<float> lo = vals(k::tril(x, diag)), up = vals(k::triu(x, diag));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t c = 0; c < 4; ++c) {
          const int64_t n = at3(s, b, r, c);
          EXPECT_EQ(lo[n], c - r <= diag ? xv[n] : 0.f) << "tril k=" << diag;
          EXPECT_EQ(up[n], c - r >= diag ? xv[n] : 0.f) << "triu k=" << diag;
        }
  }
}

TEST(TrilTriu, HandleIntegerAndNonContiguousInput) {
  Tensor x = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  Tensor xt = x.as_strided({3, 3}, {1, 3}, 0);  // [[1, 4, 7], [2, 5, 8], [3, 6, 9]]
  EXPECT_EQ(k::tril(xt).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 2, 5, 0, 3, 6, 9}));
  EXPECT_EQ(k::triu(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
}

TEST(Pad, PadsTheLastDimFirstWithAConstant) {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor a = k::pad(x, {1, 2}, 9);  // last dim: 1 left, 2 right
  EXPECT_EQ(a.sizes(), (Shape{2, 5}));
  EXPECT_EQ(vals(a), (std::vector<float>{9, 1, 2, 9, 9, 9, 3, 4, 9, 9}));
  Tensor b = k::pad(x, {0, 1, 1, 0});  // last dim: 1 right; first dim: 1 on top
  EXPECT_EQ(b.sizes(), (Shape{3, 3}));
  EXPECT_EQ(vals(b), (std::vector<float>{0, 0, 0, 1, 2, 0, 3, 4, 0}));
}

TEST(Pad, NegativePadsCrop) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor a = k::pad(x, {-1, 1});
  EXPECT_EQ(a.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(a), (std::vector<float>{2, 3, 0, 5, 6, 0}));
  Tensor b = k::pad(x, {0, -2, -1, 0});
  EXPECT_EQ(b.sizes(), (Shape{1, 1}));
  EXPECT_EQ(vals(b), (std::vector<float>{4}));
  Tensor c = k::pad(x, {4, -4}, 7);  // shifted entirely out: only padding remains
  EXPECT_EQ(vals(c), std::vector<float>(6, 7.f));
}

TEST(OneHot, EncodesEachIndexWithInferredOrGivenClassCount) {
  Tensor idx = from_vector<int32_t>({2, 0, 1, 2}, {2, 2});
  Tensor a = k::one_hot(idx);
  EXPECT_EQ(a.dtype(), DType::I64);
  EXPECT_EQ(a.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}));
  Tensor b = k::one_hot(tensor<int64_t>({1}), 4);
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 0}));
}

TEST(Multinomial, IsReproducibleForASeedAndAdvancesTheGenerator) {
  Tensor p = tensor<float>({0.1f, 0.2f, 0.3f, 0.4f});
  Generator g1(42), g2(42);
  Tensor a = k::multinomial(p, 50, true, &g1), b = k::multinomial(p, 50, true, &g2);
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
  Tensor c = k::multinomial(p, 50, true, &g1);
  EXPECT_NE(a.to_vector<int64_t>(), c.to_vector<int64_t>());
  manual_seed(5);
  Tensor d = k::multinomial(p, 3, false);
  manual_seed(5);
  EXPECT_EQ(d.to_vector<int64_t>(), k::multinomial(p, 3, false).to_vector<int64_t>());
}

TEST(Multinomial, FrequenciesMatchUnnormalisedWeightsWithReplacement) {
  Tensor p = tensor<double>({1, 0, 3, 6});  // never 1; 10%, 30%, 60%
  Generator g(3);
  const int64_t n = 40000;
  std::vector<int64_t> draws = k::multinomial(p, n, true, &g).to_vector<int64_t>();
  std::vector<double> freq(4, 0);
  for (int64_t v : draws) freq[v] += 1.0 / n;
  EXPECT_EQ(freq[1], 0.0);
  EXPECT_NEAR(freq[0], 0.1, 0.01);
  EXPECT_NEAR(freq[2], 0.3, 0.015);
  EXPECT_NEAR(freq[3], 0.6, 0.015);
}

TEST(Multinomial, WithoutReplacementDrawsDistinctCategoriesPerRow) {
  Generator g(9);
  Tensor p = rand({16, 10}, {}, &g);
  Tensor s = k::multinomial(p, 10, false, &g);
  ASSERT_EQ(s.sizes(), (Shape{16, 10}));
  std::vector<int64_t> v = s.to_vector<int64_t>();
  for (int64_t r = 0; r < 16; ++r) {
    std::set<int64_t> row(v.begin() + r * 10, v.begin() + (r + 1) * 10);
    EXPECT_EQ(row.size(), 10u) << "row " << r;
    EXPECT_EQ(*row.begin(), 0);
    EXPECT_EQ(*row.rbegin(), 9);
  }
}

TEST(Multinomial, WithoutReplacementFavoursHeavyCategoriesFirst) {
  // P(first draw = 2) = 0.7; P(second = 1 | first = 2) = 0.2 / 0.3.
  Tensor p = tensor<float>({0.1f, 0.2f, 0.7f});
  Generator g(11);
  const int64_t rows = 20000;
  Tensor probs = p.as_strided({rows, 3}, {0, 1}, 0);
  std::vector<int64_t> v = k::multinomial(probs, 2, false, &g).to_vector<int64_t>();
  double first2 = 0, second1_given_first2 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_NE(v[2 * r], v[2 * r + 1]);
    if (v[2 * r] == 2) {
      first2 += 1;
      second1_given_first2 += v[2 * r + 1] == 1;
    }
  }
  EXPECT_NEAR(first2 / rows, 0.7, 0.015);
  EXPECT_NEAR(second1_given_first2 / first2, 2.0 / 3.0, 0.02);
}

TEST(IndexErrors, BadArgumentsThrowNamingTheOp) {
  Tensor x = zeros({2, 3});
  expect_error([&] { k::cat({}, 0); }, "cat");
  expect_error([&] { k::cat({x, zeros({2, 3}, {.dtype = DType::F64})}, 0); }, "cat");
  expect_error([&] { k::cat({x, zeros({2, 4})}, 0); }, "cat");
  expect_error([&] { k::cat({x, x}, 2); }, "cat");
  expect_error([&] { k::stack({x, zeros({3, 2})}, 0); }, "stack");
  expect_error([&] { k::index_select(x, 1, tensor<int64_t>({0, 3})); }, "index_select");
  expect_error([&] { k::index_select(x, 0, tensor<int64_t>({-1})); }, "index_select");
  expect_error([&] { k::index_select(x, 0, tensor<float>({0})); }, "index_select");
  expect_error([&] { k::gather(x, 1, tensor<int64_t>({0})); }, "gather");
  expect_error([&] { k::gather(x, 1, from_vector<int64_t>({0, 0, 0, 0, 0, 0, 0, 0}, {4, 2})); }, "gather");
  expect_error(
      [&] {
        k::scatter(x, 0, zeros({1, 1}, {.dtype = DType::I64}), zeros({1, 1}, {.dtype = DType::F64}));
      },
      "scatter");
  expect_error([&] { k::scatter_add(x, 0, full({1, 1}, 2, {.dtype = DType::I64}), zeros({1, 1})); }, "scatter_add");
  expect_error([&] { k::masked_fill(x, from_vector<bool>({true, false}, {2}), 0); }, "masked_fill");
  expect_error([&] { k::masked_fill(x, zeros({3}), 0); }, "masked_fill");
  expect_error([&] { k::tril(zeros({3}), 0); }, "tril");
  expect_error([&] { k::pad(x, {1}); }, "pad");
  expect_error([&] { k::pad(x, {1, 1, 1, 1, 1, 1}); }, "pad");
  expect_error([&] { k::pad(x, {-2, -2}); }, "pad");
  expect_error([&] { k::one_hot(tensor<int64_t>({0, 3}), 3); }, "one_hot");
  expect_error([&] { k::multinomial(tensor<float>({0.5f, -0.1f}), 1, true); }, "multinomial");
  expect_error([&] { k::multinomial(tensor<float>({0.5f, 0.f}), 2, false); }, "multinomial");
  expect_error([&] { k::multinomial(tensor<float>({0.f, 0.f}), 1, true); }, "multinomial");
  expect_error([&] { k::index_add_(x, 0, tensor<int64_t>({0}), zeros({2, 3})); }, "index_add_");
}
