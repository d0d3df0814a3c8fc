// The backward engine: accumulation, retain_graph, hooks, callbacks, deep chains, custom functions.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

using namespace brisk;

TEST(Engine, ScalarSquareGradientIsTwoX) {
  Tensor x = tensor<float>({1.f, -2.f, 3.f});
  x.requires_grad_();
  (x * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.f, -4.f, 6.f}));
}

#include "common/gradcheck.h"

TEST(Gradcheck, ElementwiseBinaryWithBroadcasting) {
  manual_seed(0);
  auto a = randn({3, 4}, {.dtype = DType::F64});
  auto b = randn({4}, {.dtype = DType::F64});
  brisk::testing::expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return v[0] * v[1] + v[0] / (v[1] * v[1] + 1.0); }, {a, b}, "mul/div");
}
