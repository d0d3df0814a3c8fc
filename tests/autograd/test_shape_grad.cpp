// The view and copy ops of ops_shape.h: values against hand-computed layouts, storage sharing
// (writes through a view are visible in its base), errors, and float64 gradchecks.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include "common/errors.h"
#include "common/gradcheck.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::expect_error;
using brisk::testing::expect_gradcheck_layouts;
using brisk::testing::seeded_randn;
using V = std::vector<Tensor>;

namespace {

// 0, 1, ..., n-1 as f32 in the given shape.
Tensor iota(const Shape& s) {
  return arange(0.0, static_cast<double>(shape_numel(s)), 1.0, {.dtype = DType::F32}).view(s);
}

std::vector<float> vals(const Tensor& t) {
  return t.to_vector<float>();
}

}  // namespace

TEST(View, InfersMinusOneAndSharesStorage) {
  Tensor x = iota({6});
  Tensor v = x.view({3, -1});
  EXPECT_EQ(v.sizes(), (Shape{3, 2}));
  EXPECT_EQ(v.strides(), (Strides{2, 1}));
  EXPECT_EQ(vals(v), vals(x));
  fill_(v.select(0, 1), -1.0);  // row 1 of the view is x[2:4]
  EXPECT_EQ(vals(x), (std::vector<float>{0, 1, -1, -1, 4, 5}));
}

TEST(View, SplitsAStridedDimWithoutCopying) {
  Tensor base = iota({12});
  Tensor every_other = slice(base, 0, 0, 12, 2);  // 0, 2, ..., 10 with stride 2
  Tensor v = every_other.view({2, 3});
  EXPECT_EQ(v.strides(), (Strides{6, 2}));
  EXPECT_EQ(vals(v), (std::vector<float>{0, 2, 4, 6, 8, 10}));
}

TEST(View, OfATransposeIsIncompatibleButReshapeCopies) {
  Tensor x = iota({2, 3});
  Tensor xt = x.t();
  expect_error([&] { xt.view({6}); }, "view");
  Tensor r = xt.reshape({6});
  EXPECT_EQ(vals(r), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  fill_(r, 9.0);
  EXPECT_EQ(vals(x), (std::vector<float>{0, 1, 2, 3, 4, 5}));  // a copy, not a view
}

TEST(Reshape, OfAContiguousTensorIsAView) {
  Tensor x = iota({2, 3});
  Tensor r = x.reshape({3, 2});
  fill_(r.select(1, 0), 7.0);  // r[:, 0] = x flat 0, 2, 4
  EXPECT_EQ(vals(x), (std::vector<float>{7, 1, 7, 3, 7, 5}));
}

TEST(View, RejectsBadSizes) {
  Tensor x = iota({6});
  expect_error([&] { x.view({-1, -1}); }, "view");
  expect_error([&] { x.view({4, -1}); }, "view");
  expect_error([&] { x.reshape({7}); }, "reshape");
  expect_error([&] { x.view({-2, 3}); }, "view");
}

TEST(Permute, ReordersDimsAndStrides) {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  std::vector<float> pv = vals(p);
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(pv[(a * 2 + b) * 3 + c], static_cast<float>(b * 12 + c * 4 + a));
  expect_error([&] { x.permute({0, 0, 1}); }, "permute");
  expect_error([&] { x.permute({0, 1}); }, "permute");
}

TEST(Transpose, SwapsTwoDimsAndSharesStorage) {
  Tensor x = iota({2, 3});
  Tensor t = transpose(x, 0, -1);
  EXPECT_EQ(t.sizes(), (Shape{3, 2}));
  EXPECT_EQ(vals(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  fill_(t.select(0, 2), -1.0);  // column 2 of x
  EXPECT_EQ(vals(x), (std::vector<float>{0, 1, -1, 3, 4, -1}));
  expect_error([&] { transpose(x, 0, 2); }, "transpose");
}

TEST(Narrow, TakesARangeWithNegativeStart) {
  Tensor x = iota({3, 4});
  Tensor n = x.narrow(1, -3, 2);  // columns 1, 2
  EXPECT_EQ(vals(n), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(n.offset(), 1);
  fill_(n, 0.0);
  EXPECT_EQ(vals(x.select(0, 0)), (std::vector<float>{0, 0, 0, 3}));
  expect_error([&] { x.narrow(0, 2, 2); }, "narrow");
}

TEST(Slice, StepsClampsAndWrapsBounds) {
  Tensor x = iota({8});
  EXPECT_EQ(vals(slice(x, 0, 1, 6, 2)), (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(vals(slice(x, 0, -3, 100)), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(vals(slice(x, 0, 2, -4, 3)), (std::vector<float>{2}));
  EXPECT_EQ(slice(x, 0, 6, 2).numel(), 0);
  Tensor m = iota({2, 5});
  Tensor s = slice(m, 1, 0, 5, 2);
  EXPECT_EQ(s.strides(), (Strides{5, 2}));
  EXPECT_EQ(vals(s), (std::vector<float>{0, 2, 4, 5, 7, 9}));
  fill_(s, -1.0);
  EXPECT_EQ(vals(m.select(0, 1)), (std::vector<float>{-1, 6, -1, 8, -1}));
  expect_error([&] { slice(x, 0, 0, 4, 0); }, "slice");
}

TEST(Select, DropsTheDimAndAcceptsNegativeIndex) {
  Tensor x = iota({2, 3});
  Tensor s = x.select(1, -1);
  EXPECT_EQ(s.sizes(), (Shape{2}));
  EXPECT_EQ(vals(s), (std::vector<float>{2, 5}));
  expect_error([&] { x.select(0, 2); }, "select");
}

TEST(Expand, BroadcastsSizeOneDimsWithZeroStride) {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Strides{0, 1, 0}));
  std::vector<float> ev = vals(e);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(ev[i], static_cast<float>((i / 4) % 3));
  EXPECT_EQ(x.expand({-1, 2}).sizes(), (Shape{3, 2}));
  fill_(x, 5.0);
  EXPECT_EQ(vals(e), std::vector<float>(24, 5.f));  // the expanded view sees the write
  EXPECT_EQ(broadcast_to(tensor<float>({1, 2}), {3, 2}).sizes(), (Shape{3, 2}));
  expect_error([&] { x.expand({3, 4, 2}); }, "expand");
  expect_error([&] { broadcast_to(x, {2, 4}); }, "broadcast_to");
}

TEST(Squeeze, RemovesSizeOneDimsAndUnsqueezeAddsThem) {
  Tensor x = iota({1, 3, 1, 2});
  EXPECT_EQ(x.squeeze().sizes(), (Shape{3, 2}));
  EXPECT_EQ(x.squeeze(2).sizes(), (Shape{1, 3, 2}));
  EXPECT_EQ(x.squeeze(1).sizes(), (Shape{1, 3, 1, 2}));  // size 3: unchanged
  Tensor y = iota({3, 2});
  EXPECT_EQ(y.unsqueeze(0).sizes(), (Shape{1, 3, 2}));
  EXPECT_EQ(y.unsqueeze(-1).sizes(), (Shape{3, 2, 1}));
  EXPECT_EQ(y.unsqueeze(1).sizes(), (Shape{3, 1, 2}));
  EXPECT_EQ(vals(y.unsqueeze(1)), vals(y));
  EXPECT_TRUE(y.unsqueeze(1).is_contiguous());
  expect_error([&] { y.unsqueeze(4); }, "unsqueeze");
}

TEST(Flatten, MergesARangeOfDimsAndUnflattenSplitsOne) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.flatten().sizes(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).sizes(), (Shape{6, 4}));
  EXPECT_EQ(vals(x.flatten(1)), vals(x));
  Tensor u = unflatten(x.flatten(1), 1, {3, -1});
  EXPECT_EQ(u.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(vals(u), vals(x));
  EXPECT_EQ(full({}, 2.0).flatten().sizes(), (Shape{1}));
  expect_error([&] { x.flatten(2, 1); }, "flatten");
  expect_error([&] { unflatten(x, 1, {2, 2}); }, "unflatten");
}

TEST(Contiguous, ReturnsTheSameTensorOrAPackedCopy) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(x.contiguous().is_same(x));
  Tensor c = x.t().contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (Strides{2, 1}));
  EXPECT_EQ(vals(c), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Clone, CopiesIntoNewStorage) {
  Tensor x = iota({3});
  Tensor c = x.clone();
  fill_(c, 1.0);
  EXPECT_EQ(vals(x), (std::vector<float>{0, 1, 2}));
}

TEST(ToDType, ConvertsValuesAndCastsTheGradientBack) {
  Tensor x = from_vector<double>({1.5, -2.25}, {2});
  x.requires_grad_();
  Tensor y = x.to(DType::F32);
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(vals(y), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_TRUE(x.to(DType::F64).is_same(x));
  EXPECT_EQ(x.to(DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2}));
  (y * 3.0).sum().backward();
  EXPECT_EQ(x.grad().dtype(), DType::F64);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(ShapeGrad, ViewReshapeFlattenUnflatten) {
  expect_gradcheck_layouts(
      [](const V& v) {
        return v[0].view({2, -1}) * v[0].view({2, 3}).select(1, 0).unsqueeze(1);
      },
      {seeded_randn({6}, 1)}, "view");
  expect_gradcheck_layouts(
      [](const V& v) {
        return v[0].reshape({-1, 2}) * 2.0;
      },
      {seeded_randn({2, 3}, 2)}, "reshape");
  expect_gradcheck_layouts([](const V& v) { return v[0].flatten(1) * v[0].flatten(1); }, {seeded_randn({2, 2, 3}, 3)},
                           "flatten");
  expect_gradcheck_layouts(
      [](const V& v) {
        return unflatten(v[0], 1, {2, 2}).select(2, 1);
      },
      {seeded_randn({3, 4}, 4)}, "unflatten");
}

TEST(ShapeGrad, PermuteTransposeNarrowSliceSelect) {
  expect_gradcheck_layouts(
      [](const V& v) {
        return v[0].permute({1, 2, 0}) * 1.5;
      },
      {seeded_randn({2, 3, 2}, 5)}, "permute");
  expect_gradcheck_layouts([](const V& v) { return v[0].transpose(0, 1) * v[0].transpose(-1, 0); },
                           {seeded_randn({3, 3}, 6)}, "transpose");
  expect_gradcheck_layouts([](const V& v) { return v[0].narrow(1, 1, 2) * v[0].narrow(1, -2, 2); },
                           {seeded_randn({2, 4}, 7)}, "narrow");
  expect_gradcheck_layouts([](const V& v) { return slice(v[0], 1, 1, 6, 2) + slice(v[0], 1, -3, 100); },
                           {seeded_randn({2, 6}, 8)}, "slice");
  expect_gradcheck_layouts([](const V& v) { return v[0].select(0, 1) * v[0].select(1, -1); }, {seeded_randn({3, 3}, 9)},
                           "select");
}

TEST(ShapeGrad, ExpandBroadcastSqueezeUnsqueeze) {
  expect_gradcheck_layouts(
      [](const V& v) {
        return v[0].expand({2, 3, 4}) * v[1];
      },
      {seeded_randn({3, 1}, 10), seeded_randn({2, 3, 4}, 11)}, "expand");
  expect_gradcheck_layouts(
      [](const V& v) {
        return broadcast_to(v[0], {3, 2});
      },
      {seeded_randn({2}, 12)}, "broadcast_to");
  expect_gradcheck_layouts([](const V& v) { return v[0].squeeze() * 2.0 + v[0].squeeze(0).squeeze(-1); },
                           {seeded_randn({1, 3, 1}, 13)}, "squeeze");
  expect_gradcheck_layouts([](const V& v) { return v[0].unsqueeze(1) * v[0].unsqueeze(0); }, {seeded_randn({3}, 14)},
                           "unsqueeze");
}

TEST(ShapeGrad, ContiguousAndClone) {
  expect_gradcheck_layouts([](const V& v) { return v[0].t().contiguous() * v[0].clone().t(); },
                           {seeded_randn({2, 3}, 15)}, "contiguous/clone");
}
