// Float64 finite-difference checks of every differentiable elementwise op, on contiguous and
// non-contiguous inputs, with broadcasting.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include "common/gradcheck.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

namespace {
Tensor positive(const Shape& s) {
  return rand(s, {.dtype = DType::F64}) + 0.5;
}
// Values away from 0 so kinks (relu, abs, clamp) are not hit by the finite difference.
Tensor away_from_zero(const Shape& s) {
  Tensor r = rand(s, {.dtype = DType::F64}) + 0.1;
  Tensor sgn =
      where(rand(s, {.dtype = DType::F64}) > 0.5, ones(s, {.dtype = DType::F64}), full(s, -1.0, {.dtype = DType::F64}));
  return r * sgn;
}
}  // namespace

TEST(ElementwiseGrad, UnaryOps) {
  manual_seed(7);
  struct Case {
    const char* name;
    Fn fn;
    Tensor x;
  };
  std::vector<Case> cases = {
      {"neg", [](auto& v) { return neg(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"exp", [](auto& v) { return exp(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"log", [](auto& v) { return log(v[0]); }, positive({3, 4})},
      {"sqrt", [](auto& v) { return sqrt(v[0]); }, positive({3, 4})},
      {"rsqrt", [](auto& v) { return rsqrt(v[0]); }, positive({3, 4})},
      {"abs", [](auto& v) { return abs(v[0]); }, away_from_zero({3, 4})},
      {"relu", [](auto& v) { return relu(v[0]); }, away_from_zero({3, 4})},
      {"gelu", [](auto& v) { return gelu(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"gelu_tanh", [](auto& v) { return gelu(v[0], GeluApproximation::Tanh); }, randn({3, 4}, {.dtype = DType::F64})},
      {"silu", [](auto& v) { return silu(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"sigmoid", [](auto& v) { return sigmoid(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"tanh", [](auto& v) { return tanh(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"sin", [](auto& v) { return sin(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"cos", [](auto& v) { return cos(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"square", [](auto& v) { return square(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"reciprocal", [](auto& v) { return reciprocal(v[0]); }, positive({3, 4})},
      {"log1p", [](auto& v) { return log1p(v[0]); }, positive({3, 4})},
      {"expm1", [](auto& v) { return expm1(v[0]); }, randn({3, 4}, {.dtype = DType::F64})},
      {"clamp", [](auto& v) { return clamp(v[0], -0.5, 0.7); }, away_from_zero({3, 4}) * 1.3},
      {"clamp_min", [](auto& v) { return clamp(v[0], 0.05, std::nullopt); }, away_from_zero({3, 4})},
      {"pow_scalar", [](auto& v) { return pow(v[0], 2.5); }, positive({3, 4})},
      {"scalar_ops", [](auto& v) { return (2.0 - v[0]) * 3.0 / 4.0 + 1.0; }, randn({3, 4}, {.dtype = DType::F64})},
      {"scalar_div", [](auto& v) { return 2.0 / v[0]; }, positive({3, 4})},
  };
  for (auto& c : cases) expect_gradcheck_layouts(c.fn, {c.x}, c.name);
}

TEST(ElementwiseGrad, BinaryOpsWithBroadcasting) {
  manual_seed(8);
  struct Case {
    const char* name;
    Fn fn;
    Shape a, b;
  };
  std::vector<Case> cases = {
      {"add", [](auto& v) { return v[0] + v[1]; }, {2, 3, 4}, {3, 1}},
      {"add_alpha", [](auto& v) { return add(v[0], v[1], -2.5); }, {2, 3}, {3}},
      {"sub", [](auto& v) { return v[0] - v[1]; }, {4, 1}, {1, 5}},
      {"mul", [](auto& v) { return v[0] * v[1]; }, {2, 3, 4}, {4}},
      {"div", [](auto& v) { return v[0] / (v[1] * v[1] + 0.5); }, {3, 4}, {3, 1}},
      {"maximum", [](auto& v) { return maximum(v[0], v[1]); }, {3, 4}, {3, 4}},
      {"minimum", [](auto& v) { return minimum(v[0], v[1]); }, {3, 4}, {1, 4}},
  };
  for (auto& c : cases)
    expect_gradcheck_layouts(c.fn, {randn(c.a, {.dtype = DType::F64}), randn(c.b, {.dtype = DType::F64})}, c.name);
  expect_gradcheck_layouts([](auto& v) { return pow(v[0], v[1]); },
                           {positive({3, 4}), randn({4}, {.dtype = DType::F64})}, "pow");
}

TEST(ElementwiseGrad, WhereRoutesGradientsByCondition) {
  manual_seed(9);
  Tensor cond = rand({3, 4}) > 0.5;
  expect_gradcheck_layouts([cond](auto& v) { return where(cond, v[0], v[1]); },
                           {randn({3, 4}, {.dtype = DType::F64}), randn({4}, {.dtype = DType::F64})}, "where");
}

TEST(ElementwiseGrad, ReductionsAndViewsCompose) {
  manual_seed(10);
  expect_gradcheck_layouts(
      [](auto& v) { return sum(v[0] * v[1], {1}, /*keepdim=*/true).transpose(0, 1).reshape({-1}) + mean(v[0]); },
      {randn({3, 4}, {.dtype = DType::F64}), randn({3, 4}, {.dtype = DType::F64})}, "sum/mean/views");
}

TEST(Gradcheck, CatchesAWrongGradient) {
  // The checker itself must be able to fail: an op whose backward is off by 2x.
  struct Wrong : autograd::Function<Wrong> {
    static Tensor forward(autograd::FunctionCtx&, const Tensor& x) { return x * 3.0; }
    static std::vector<Tensor> backward(autograd::FunctionCtx&, const std::vector<Tensor>& g) { return {g[0] * 6.0}; }
  };
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    expect_gradcheck_layouts([](auto& v) { return Wrong::apply(v[0]); }, {randn({2}, {.dtype = DType::F64})}, "wrong");
  }
  EXPECT_GT(failures.size(), 0);
}
