// Differentiable indexing ops: split/chunk views, float64 gradchecks (contiguous and strided
// inputs) for every differentiable op, and gradients reaching only the inputs that need them.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include "common/gradcheck.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;
using brisk::testing::seeded_randn;
using V = std::vector<Tensor>;

namespace {

Shape sizes_of(const Tensor& t) {
  return t.sizes();
}

}  // namespace

TEST(Split, BySizeGivesEqualPiecesAndASmallerLastOne) {
  Tensor x = arange(0.0, 10.0, 1.0, {.dtype = DType::F32}).view({2, 5});
  V p = split(x, 2, 1);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(sizes_of(p[0]), (Shape{2, 2}));
  EXPECT_EQ(sizes_of(p[2]), (Shape{2, 1}));
  EXPECT_EQ(p[1].to_vector<float>(), (std::vector<float>{2, 3, 7, 8}));
  EXPECT_EQ(p[2].to_vector<float>(), (std::vector<float>{4, 9}));
}

TEST(Split, WithSizesReturnsViewsThatShareStorage) {
  Tensor x = zeros({5});
  V p = split(x, std::vector<int64_t>{1, 3, 1});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(sizes_of(p[1]), (Shape{3}));
  fill_(p[1], 2.0);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 2, 2, 2, 0}));
}

TEST(Chunk, UsesCeilSizedPiecesAndMayReturnFewerThanAsked) {
  Tensor x = arange(6, {.dtype = DType::F32});
  V a = chunk(x, 4);  // ceil(6 / 4) = 2 -> three chunks of 2
  ASSERT_EQ(a.size(), 3u);
  for (const Tensor& c : a) EXPECT_EQ(sizes_of(c), (Shape{2}));
  V b = chunk(arange(5, {.dtype = DType::F32}), 3);  // 2, 2, 1
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[2].to_vector<float>(), (std::vector<float>{4}));
}

TEST(IndexGrad, CatAndStackSplitTheGradient) {
  expect_gradcheck_layouts(
      [](const V& v) {
        return cat({v[0], v[1] * 2.0, v[0]}, 1);
      },
      {seeded_randn({2, 3}, 1), seeded_randn({2, 2}, 2)}, "cat");
  expect_gradcheck_layouts(
      [](const V& v) {
        return stack({v[0], v[1] * v[1]}, 1);
      },
      {seeded_randn({2, 3}, 3), seeded_randn({2, 3}, 4)}, "stack");
}

TEST(IndexGrad, SplitAndChunkPiecesFlowBack) {
  expect_gradcheck_layouts(
      [](const V& v) {
        V p = split(v[0], 2, 1);
        return cat({p[2], p[0] * 3.0, p[1]}, 1);
      },
      {seeded_randn({2, 5}, 5)}, "split");
  expect_gradcheck_layouts(
      [](const V& v) {
        V p = chunk(v[0], 2, 0);
        return p[0] * p[1];
      },
      {seeded_randn({4, 3}, 6)}, "chunk");
  // Pieces that do not reach the loss get a zero gradient (split records one node for all pieces).
  expect_gradcheck_layouts(
      [](const V& v) {
        V p = split(v[0], std::vector<int64_t>{1, 2, 0, 3}, 1);
        return exp(p[1]);
      },
      {seeded_randn({3, 6}, 7)}, "split, one piece used");
}

TEST(IndexGrad, IndexSelectAddsGradientsOfRepeatedRows) {
  Tensor idx = tensor<int32_t>({2, 0, 2, 2});
  expect_gradcheck_layouts([idx](const V& v) { return index_select(v[0], 0, idx); }, {seeded_randn({3, 2}, 7)},
                           "index_select dim 0");
  expect_gradcheck_layouts([idx](const V& v) { return index_select(v[0], -1, idx); }, {seeded_randn({2, 3, 3}, 8)},
                           "index_select dim -1");
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  x.requires_grad_();
  index_select(x, 0, idx).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 0, 3}));
}

TEST(IndexGrad, GatherScattersGradientBackWithDuplicates) {
  Tensor idx = from_vector<int64_t>({0, 2, 2, 1, 1, 1}, {2, 3});
  expect_gradcheck_layouts([idx](const V& v) { return gather(v[0], 1, idx); }, {seeded_randn({2, 4}, 9)},
                           "gather dim 1");
  Tensor idx0 = from_vector<int64_t>({2, 0, 0, 1}, {2, 2});
  expect_gradcheck_layouts([idx0](const V& v) { return gather(v[0], 0, idx0); }, {seeded_randn({3, 3}, 10)},
                           "gather dim 0");
}

TEST(IndexGrad, ScatterMasksOverwrittenInputAndGathersForSrc) {
  // Row 0 writes column 1 twice (the second write wins); src is larger than index.
  Tensor idx = from_vector<int64_t>({1, 1, 3, 0, 2, 3}, {2, 3});
  expect_gradcheck_layouts([idx](const V& v) { return scatter(v[0], 1, idx, v[1]); },
                           {seeded_randn({2, 4}, 11), seeded_randn({3, 4}, 12)}, "scatter");
  Tensor x = zeros({1, 3}), src = ones({1, 2});
  x.requires_grad_();
  src.requires_grad_();
  Tensor w = from_vector<float>({1, 2, 3}, {1, 3});
  (scatter(x, 1, from_vector<int64_t>({2, 2}, {1, 2}), src) * w).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 2, 0}));
  EXPECT_EQ(src.grad().to_vector<float>(), (std::vector<float>{0, 3}));
}

TEST(IndexGrad, ScatterAddPassesGradientToInputAndGathersForSrc) {
  Tensor idx = from_vector<int32_t>({0, 0, 2, 1, 0, 2}, {3, 2});
  expect_gradcheck_layouts([idx](const V& v) { return scatter_add(v[0], 0, idx, v[1]); },
                           {seeded_randn({3, 3}, 13), seeded_randn({4, 2}, 14)}, "scatter_add");
}

TEST(IndexGrad, MaskedFillTrilTriuZeroTheMaskedGradient) {
  Tensor mask = from_vector<bool>({true, false, false, true}, {4});
  expect_gradcheck_layouts([mask](const V& v) { return masked_fill(v[0] * v[0], mask, 3.0); },
                           {seeded_randn({3, 4}, 15)}, "masked_fill");
  expect_gradcheck_layouts([](const V& v) { return tril(v[0], -1) + triu(v[0], 2); }, {seeded_randn({2, 3, 4}, 16)},
                           "tril/triu");
}

TEST(IndexGrad, PadNarrowsTheGradientBackIncludingCrops) {
  expect_gradcheck_layouts([](const V& v) { return pad(v[0], {1, 2, 0, 1}, 0.5); }, {seeded_randn({2, 3}, 17)}, "pad");
  expect_gradcheck_layouts(
      [](const V& v) {
        return pad(v[0], {-1, 2, 1, -1});
      },
      {seeded_randn({3, 3}, 18)}, "pad with crop");
}

TEST(IndexGrad, OnlyInputsThatRequireGradReceiveOne) {
  Tensor a = ones({2}), b = ones({3});
  b.requires_grad_();
  Tensor y = cat({a, b});
  EXPECT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

TEST(IndexGrad, IntegerOpsCarryNoGradient) {
  EXPECT_FALSE(one_hot(tensor<int64_t>({0, 1})).requires_grad());
  Tensor p = tensor<float>({0.5f, 0.5f});
  p.requires_grad_();
  EXPECT_FALSE(multinomial(p, 1).requires_grad());
}

TEST(IndexErrors, SplitAndChunkRejectBadSizes) {
  Tensor x = zeros({4});
  EXPECT_THROW(split(x, 0), Error);
  EXPECT_THROW(split(x, std::vector<int64_t>{1, 2}), Error);
  EXPECT_THROW(chunk(x, 0), Error);
  EXPECT_THROW(split(x, 2, 1), Error);
  try {
    split(x, std::vector<int64_t>{3, 3});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("split"), std::string::npos) << e.what();
  }
}
