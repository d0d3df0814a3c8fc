// Gradients of batch_norm: float64 central differences in training mode (through the batch
// statistics) and eval mode (running statistics as constants), with and without the affine
// parameters, on contiguous and non-contiguous inputs; and the running-statistics update.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include "common/gradcheck.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;
using brisk::testing::seeded_randn;

TEST(BatchNormGrad, TrainingGradcheckThroughTheBatchStatistics) {
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) { return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], true); },
      {seeded_randn({4, 3, 2, 3}, 1), seeded_randn({3}, 2), seeded_randn({3}, 3)}, "batch_norm training 4-d");
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) { return batch_norm(v[0], Tensor(), Tensor(), {}, {}, true); },
      {seeded_randn({5, 2}, 4)}, "batch_norm training 2-d, no affine");
}

TEST(BatchNormGrad, EvalGradcheckWithRunningStatistics) {
  Tensor rm = seeded_randn({3}, 5), rv = rand({3}, {.dtype = DType::F64}) + 0.5;
  expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return batch_norm(v[0], rm, rv, v[1], v[2], false); },
                           {seeded_randn({2, 3, 4}, 6), seeded_randn({3}, 7), seeded_randn({3}, 8)}, "batch_norm eval");
}

TEST(BatchNormGrad, TrainingUpdatesRunningStatisticsOnlyWhenGiven) {
  Tensor x = from_vector<double>({1, 5, 3, 7}, {2, 2});
  Tensor rm = zeros({2}, {.dtype = DType::F64}), rv = ones({2}, {.dtype = DType::F64});
  batch_norm(x, rm, rv, Tensor(), Tensor(), /*training=*/true, /*momentum=*/0.5);
  EXPECT_EQ(rm.to_vector<double>(), (std::vector<double>{1.0, 3.0}));
  EXPECT_EQ(rv.to_vector<double>(), (std::vector<double>{1.5, 1.5}));  // 0.5 * 1 + 0.5 * unbiased var 2
  batch_norm(x, rm, rv, Tensor(), Tensor(), /*training=*/false);
  EXPECT_EQ(rm.to_vector<double>(), (std::vector<double>{1.0, 3.0}));
}

TEST(BatchNormGrad, F32ParametersOfAnF64InputGetF32Gradients) {
  Tensor x = seeded_randn({4, 2}, 9);
  Tensor w = ones({2}), b = zeros({2});
  w.requires_grad_();
  b.requires_grad_();
  batch_norm(x, Tensor(), Tensor(), w, b, true).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::F32);
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{4, 4}));
}
