// scaled_dot_product_attention against the unfused ops it replaces (matmul, a -inf bias above the
// diagonal, softmax, matmul), values and gradients; a float64 gradient check across several query
// blocks; results independent of the thread count; autocast; errors.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/errors.h"
#include "common/gradcheck.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::expect_error;
using brisk::testing::expect_gradcheck;
using brisk::testing::leaf;
using brisk::testing::seeded_randn;

namespace {

Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor s = matmul(q * scale, k.transpose(-2, -1));
  if (causal) s = s + triu(full({q.size(-2), k.size(-2)}, -INFINITY, {.dtype = s.dtype()}), 1);
  return matmul(softmax(s, -1), v);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return amax(abs(a.to(DType::F64) - b.to(DType::F64))).item<double>();
}

}  // namespace

// T = 150: three blocks of queries (64, 64, 22), the last one short; leading dims (2, 3).
TEST(Attention, MatchesTheUnfusedOpsWithGradients) {
  for (bool causal : {true, false}) {
    const Tensor q0 = seeded_randn({2, 3, 150, 16}, 1), k0 = seeded_randn({2, 3, 150, 16}, 2),
                 v0 = seeded_randn({2, 3, 150, 8}, 3);
    const Tensor w = seeded_randn({2, 3, 150, 8}, 4);
    Tensor q = leaf(q0), k = leaf(k0), v = leaf(v0);
    Tensor y = scaled_dot_product_attention(q, k, v, {.is_causal = causal});
    (y * w).sum().backward();
    Tensor q2 = leaf(q0), k2 = leaf(k0), v2 = leaf(v0);
    Tensor y2 = unfused(q2, k2, v2, causal);
    (y2 * w).sum().backward();
    EXPECT_EQ(y.sizes(), y2.sizes());
    EXPECT_LT(max_abs_diff(y, y2), 1e-12) << "causal " << causal;
    EXPECT_LT(max_abs_diff(q.grad(), q2.grad()), 1e-12) << "causal " << causal;
    EXPECT_LT(max_abs_diff(k.grad(), k2.grad()), 1e-12) << "causal " << causal;
    EXPECT_LT(max_abs_diff(v.grad(), v2.grad()), 1e-12) << "causal " << causal;
  }
}

TEST(Attention, CausalMeansEachQuerySeesOnlyThePast) {
  // Changing key/value t must not change the outputs of queries before t.
  const Tensor q = seeded_randn({1, 1, 130, 8}, 5), k = seeded_randn({1, 1, 130, 8}, 6),
               v = seeded_randn({1, 1, 130, 8}, 7);
  Tensor y = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  Tensor k2 = k.clone(), v2 = v.clone();
  k2.narrow(2, 100, 30).fill_(3.0);
  v2.narrow(2, 100, 30).fill_(-3.0);
  Tensor y2 = scaled_dot_product_attention(q, k2, v2, {.is_causal = true});
  EXPECT_EQ(max_abs_diff(y.narrow(2, 0, 100), y2.narrow(2, 0, 100)), 0.0);
  EXPECT_GT(max_abs_diff(y.narrow(2, 100, 30), y2.narrow(2, 100, 30)), 0.1);
}

TEST(Attention, GradientsPassAFloat64Check) {
  const Tensor q = leaf(seeded_randn({1, 2, 70, 4}, 8)), k = leaf(seeded_randn({1, 2, 70, 4}, 9)),
               v = leaf(seeded_randn({1, 2, 70, 3}, 10));
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true, .scale = 0.7});
      },
      {q, k, v}, "causal sdpa");
}

TEST(Attention, ResultsDoNotDependOnTheThreadCount) {
  const Tensor q0 = seeded_randn({2, 4, 200, 32}, 11, DType::F32), k0 = seeded_randn({2, 4, 200, 32}, 12, DType::F32),
               v0 = seeded_randn({2, 4, 200, 32}, 13, DType::F32), w = seeded_randn({2, 4, 200, 32}, 14, DType::F32);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor q = leaf(q0), k = leaf(k0), v = leaf(v0);
    Tensor y = scaled_dot_product_attention(q, k, v, {.is_causal = true});
    (y * w).sum().backward();
    return std::vector<std::vector<float>>{y.to_vector<float>(), q.grad().to_vector<float>(),
                                           k.grad().to_vector<float>(), v.grad().to_vector<float>()};
  };
  const int before = get_num_threads();
  auto one = run(1), two = run(2), three = run(3);
  set_num_threads(before);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

TEST(Attention, AutocastRunsTheProductsInBf16) {
  const Tensor q = seeded_randn({1, 2, 80, 16}, 15, DType::F32), k = seeded_randn({1, 2, 80, 16}, 16, DType::F32),
               v = seeded_randn({1, 2, 80, 16}, 17, DType::F32);
  Tensor ref = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  Tensor y;
  {
    amp::Autocast ac(DType::BF16);
    y = scaled_dot_product_attention(q, k, v, {.is_causal = true});
  }
  EXPECT_EQ(y.dtype(), DType::BF16);
  EXPECT_LT(max_abs_diff(y, ref), 0.05);
}

// The packed form (a GPT block's (B, T, 3C) projection in, (B, T, C) out) is the split, the
// head views, the op and the merge of the heads, values and gradients.
TEST(Attention, PackedQkvIsTheSplitHeadsThroughTheOp) {
  const int64_t B = 2, T = 70, H = 3, D = 4, C = H * D;
  const Tensor x0 = seeded_randn({B, T, 3 * C}, 21), w = seeded_randn({B, T, C}, 22);
  Tensor x = leaf(x0);
  Tensor y = scaled_dot_product_attention_packed(x, H, {.is_causal = true});
  (y * w).sum().backward();
  Tensor x2 = leaf(x0);
  auto heads = [&](const Tensor& t, int i) { return t.narrow(2, i * C, C).view({B, T, H, D}).transpose(1, 2); };
  Tensor y2 = unfused(heads(x2, 0), heads(x2, 1), heads(x2, 2), true).transpose(1, 2).reshape({B, T, C});
  (y2 * w).sum().backward();
  EXPECT_EQ(y.sizes(), Shape({B, T, C}));
  EXPECT_LT(max_abs_diff(y, y2), 1e-12);
  EXPECT_LT(max_abs_diff(x.grad(), x2.grad()), 1e-12);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return scaled_dot_product_attention_packed(in[0], H, {.scale = 0.6}); },
      {leaf(seeded_randn({1, 9, 3 * C}, 23))}, "packed sdpa");
  expect_error(
      [&] {
        scaled_dot_product_attention_packed(seeded_randn({2, 5, 10}, 24), 3);
      },
      "scaled_dot_product_attention_packed: expected qkv (B, T, 3 * n_head * head dim)");
  expect_error([&] { scaled_dot_product_attention_packed(seeded_randn({10, 9}, 24), 1); }, "got shape [10, 9]");
}

TEST(Attention, BadShapesNameTheOp) {
  const Tensor q = seeded_randn({2, 5, 4}, 18);
  expect_error(
      [&] {
        scaled_dot_product_attention(q, seeded_randn({2, 5, 3}, 19), seeded_randn({2, 5, 4}, 20));
      },
      "scaled_dot_product_attention: expected q (..., Tq, d)");
  expect_error(
      [&] {
        scaled_dot_product_attention(q, seeded_randn({3, 5, 4}, 19), seeded_randn({3, 5, 4}, 20));
      },
      "must share their leading dims");
  expect_error(
      [&] {
        scaled_dot_product_attention(q, seeded_randn({2, 6, 4}, 19), seeded_randn({2, 6, 4}, 20), {.is_causal = true});
      },
      "is_causal needs as many queries as keys, got 5 and 6");
}
