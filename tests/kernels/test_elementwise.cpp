// Elementwise kernels against scalar references: every unary and binary op, broadcasting over
// arbitrary strides, 16-bit types computed in f32, comparisons, where, clamp, casts, copies.
#include <gtest/gtest.h>
#include <omp.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <cmath>
#include <limits>

using namespace brisk;
using namespace brisk::kernels;

namespace {

double ref_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Log:
      return std::log(x);
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Rsqrt:
      return 1 / std::sqrt(x);
    case UnaryOp::Abs:
      return std::fabs(x);
    case UnaryOp::Relu:
      return x > 0 ? x : 0;
    case UnaryOp::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case UnaryOp::GeluErf:
      return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
    case UnaryOp::Silu:
      return x / (1 + std::exp(-x));
    case UnaryOp::Sigmoid:
      return 1 / (1 + std::exp(-x));
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Sin:
      return std::sin(x);
    case UnaryOp::Cos:
      return std::cos(x);
    case UnaryOp::Square:
      return x * x;
    case UnaryOp::Reciprocal:
      return 1 / x;
    case UnaryOp::Sign:
      return (x > 0) - (x < 0);
    case UnaryOp::Log1p:
      return std::log1p(x);
    case UnaryOp::Expm1:
      return std::expm1(x);
  }
  return 0;
}

const UnaryOp kAllUnary[] = {UnaryOp::Neg,        UnaryOp::Exp,  UnaryOp::Log,      UnaryOp::Sqrt,    UnaryOp::Rsqrt,
                             UnaryOp::Abs,        UnaryOp::Relu, UnaryOp::GeluTanh, UnaryOp::GeluErf, UnaryOp::Silu,
                             UnaryOp::Sigmoid,    UnaryOp::Tanh, UnaryOp::Sin,      UnaryOp::Cos,     UnaryOp::Square,
                             UnaryOp::Reciprocal, UnaryOp::Sign, UnaryOp::Log1p,    UnaryOp::Expm1};

bool needs_positive(UnaryOp op) {
  return op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt || op == UnaryOp::Log1p ||
         op == UnaryOp::Reciprocal;
}

}  // namespace

TEST(Elementwise, EveryUnaryOpMatchesTheScalarReferenceInEachFloatType) {
  manual_seed(3);
  Tensor base = randn({5, 7}, {.dtype = DType::F64}) * 2.0;
  for (UnaryOp op : kAllUnary) {
    Tensor x64 = needs_positive(op) ? abs(base) + 0.1 : base;
    std::vector<double> xs = x64.to_vector<double>();
    for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
      Tensor x = cast(x64, dt);
      std::vector<double> xin = x.to_vector<double>();  // the values after rounding to dt
      std::vector<double> y = unary(op, x).to_vector<double>();
      double tol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 2e-6 : dt == DType::F16 ? 2e-3 : 1.6e-2;
      for (size_t i = 0; i < xs.size(); ++i) {
        double r = ref_unary(op, xin[i]);
        EXPECT_NEAR(y[i], r, tol * (1 + std::fabs(r))) << op_name(op) << " " << dtype_name(dt) << " x=" << xin[i];
      }
    }
  }
}

TEST(Elementwise, UnaryOnATransposedViewFollowsTheStrides) {
  Tensor x =
      arange(0.0, 6.0, 1.0, {.dtype = DType::F32}).as_strided({3, 2}, {1, 3}, 0);  // transpose of [[0,1,2],[3,4,5]]
  EXPECT_EQ(unary(UnaryOp::Square, x).to_vector<float>(), (std::vector<float>{0, 9, 1, 16, 4, 25}));
}

TEST(Elementwise, BinaryBroadcastsLikeNumPy) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({10, 20}, {2, 1});
  Tensor c = from_vector<float>({100, 200, 300}, {3});
  EXPECT_EQ(binary(BinaryOp::Add, a, b).to_vector<float>(), (std::vector<float>{11, 12, 13, 24, 25, 26}));
  EXPECT_EQ(binary(BinaryOp::Mul, a, c).to_vector<float>(), (std::vector<float>{100, 400, 900, 400, 1000, 1800}));
  Tensor outer = binary(BinaryOp::Sub, b, c);  // (2,1) - (3) -> (2,3)
  EXPECT_EQ(outer.sizes(), (Shape{2, 3}));
  EXPECT_EQ(outer.to_vector<float>(), (std::vector<float>{-90, -190, -290, -80, -180, -280}));
}

TEST(Elementwise, BinaryOverArbitraryStridesMatchesANaiveLoop) {
  manual_seed(4);
  // a: a permuted 3-D view; b: a step-2 slice broadcast along dim 1.
  Tensor a0 = randn({4, 3, 5});
  Tensor a = a0.as_strided({5, 4, 3}, {1, 15, 5}, 0);
  Tensor b0 = randn({5, 1, 6});
  Tensor b = b0.as_strided({5, 1, 3}, {6, 6, 2}, 0);
  for (BinaryOp op :
       {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Minimum}) {
    std::vector<float> out = binary(op, a, b).to_vector<float>();
    std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k) {
          float x = av[(i * 4 + j) * 3 + k], y = bv[i * 3 + k];
          float r = op == BinaryOp::Add       ? x + y
                    : op == BinaryOp::Sub     ? x - y
                    : op == BinaryOp::Mul     ? x * y
                    : op == BinaryOp::Div     ? x / y
                    : op == BinaryOp::Maximum ? std::max(x, y)
                                              : std::min(x, y);
          EXPECT_FLOAT_EQ(out[(i * 4 + j) * 3 + k], r) << op_name(op);
        }
  }
}

TEST(Elementwise, LargeTensorsGiveTheSameResultOnOneAndTwoThreads) {
  manual_seed(5);
  Tensor a = randn({300, 700}), b = randn({700});
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<float> one = binary(BinaryOp::Mul, a, b).to_vector<float>();
  omp_set_num_threads(2);
  std::vector<float> two = binary(BinaryOp::Mul, a, b).to_vector<float>();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

TEST(Elementwise, HalfAndBFloat16ComputeInFloatAndRoundOnce) {
  Tensor a = cast(from_vector<float>({1.0f, 1000.0f, 0.1f}, {3}), DType::F16);
  Tensor b = cast(from_vector<float>({0.0004f, 0.3f, 0.2f}, {3}), DType::F16);
  Tensor s = binary(BinaryOp::Add, a, b);
  EXPECT_EQ(s.dtype(), DType::F16);
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), sv = s.to_vector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sv[i], static_cast<float>(Half(av[i] + bv[i])));
  Tensor c = cast(from_vector<float>({3.0f, -7.5f}, {2}), DType::BF16);
  EXPECT_EQ(binary(BinaryOp::Mul, c, c).to_vector<float>(),
            (std::vector<float>{9.0f, static_cast<float>(BFloat16(56.25f))}));
}

TEST(Elementwise, MixedDtypesPromote) {
  Tensor i = from_vector<int32_t>({1, 2}, {2});
  Tensor f = from_vector<float>({0.5f, 0.25f}, {2});
  Tensor r = binary(BinaryOp::Add, i, f);
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1.5f, 2.25f}));
  Tensor q = binary(BinaryOp::Div, i, from_vector<int32_t>({2, 4}, {2}));  // true division
  EXPECT_EQ(q.dtype(), DType::F32);
  EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(binary(BinaryOp::Mul, i, i).dtype(), DType::I32);
}

TEST(Elementwise, ComparisonsGiveBool) {
  Tensor a = from_vector<float>({1, 2, 3}, {3});
  Tensor b = from_vector<float>({3, 2, 1}, {3});
  EXPECT_EQ(compare(CompareOp::Lt, a, b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(compare(CompareOp::Eq, a, b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(compare(CompareOp::Ge, a, b).dtype(), DType::Bool);
  EXPECT_EQ(compare_scalar(CompareOp::Gt, a, 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(compare_scalar(CompareOp::Ne, a, 2).to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

TEST(Elementwise, WhereBroadcastsAllThree) {
  Tensor cond = from_vector<bool>({true, false}, {2, 1});
  Tensor a = from_vector<float>({1, 2, 3}, {3});
  Tensor b = full({1}, -1.0);
  EXPECT_EQ(kernels::where(cond, a, b).to_vector<float>(), (std::vector<float>{1, 2, 3, -1, -1, -1}));
}

TEST(Elementwise, ClampHandlesOneSidedBoundsAndNaN) {
  Tensor x = from_vector<float>({-2, 0.5f, 3, NAN}, {4});
  auto y = kernels::clamp(x, -1.0, 1.0).to_vector<float>();
  EXPECT_EQ(y[0], -1);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[2], 1);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(kernels::clamp(x, std::nullopt, 0.0).to_vector<float>()[2], 0.0f);
  EXPECT_EQ(kernels::clamp(from_vector<int64_t>({-5, 5}, {2}), 0.0, std::nullopt).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 5}));
}

TEST(Elementwise, CastRoundsToNearestEvenAndCopiesAcrossDtypes) {
  Tensor x = from_vector<double>({1.5, -2.5, 65519.0, 1e-8}, {4});
  EXPECT_EQ(cast(x, DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 65519, 0}));  // truncation, as C++
  auto h = cast(x, DType::F16).to_vector<float>();
  EXPECT_EQ(h[2], 65504.0f);
  EXPECT_EQ(cast(from_vector<float>({0, 2, -0.5f}, {3}), DType::Bool).to_vector<bool>(),
            (std::vector<bool>{false, true, true}));
  Tensor dst = zeros({2, 3}, {.dtype = DType::BF16});
  kernels::copy_(dst, from_vector<int32_t>({7, 8, 9}, {3}));  // broadcast + cast
  EXPECT_EQ(dst.to_vector<float>(), (std::vector<float>{7, 8, 9, 7, 8, 9}));
}

TEST(Elementwise, CastOfOutOfRangeFloatsToIntegersIsDefined) {
  // A C++ cast is undefined here; brisk converts through int64 (saturating, NaN to 0) and
  // narrows modulo 2^bits, which PyTorch also gives for u8.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor x = from_vector<float>({-7.4f, 300.5f, -1.0f, 255.9f}, {4});
  EXPECT_EQ(cast(x, DType::U8).to_vector<int64_t>(), (std::vector<int64_t>{249, 44, 255, 255}));
  Tensor y = from_vector<double>({nan, inf, -inf, 1e30, -1e30, 4294967296.0 + 5, -2.9}, {7});
  EXPECT_EQ(cast(y, DType::I64).to_vector<int64_t>(),
            (std::vector<int64_t>{0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 4294967301LL, -2}));
  EXPECT_EQ(cast(y, DType::I32).to_vector<int64_t>(), (std::vector<int64_t>{0, -1, 0, -1, 0, 5, -2}));
  EXPECT_EQ(cast(from_vector<double>({nan}, {1}), DType::Bool).to_vector<bool>(), (std::vector<bool>{true}));
}

TEST(Elementwise, InPlaceAddAccumulatesWithAlphaAndBroadcast) {
  Tensor acc = zeros({2, 2});
  kernels::add_(acc, from_vector<float>({1, 2}, {2}));
  kernels::add_(acc, full({2, 2}, 1.0), -0.5);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{0.5f, 1.5f, 0.5f, 1.5f}));
  mul_scalar_(acc, 2.0);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{1, 3, 1, 3}));
}

TEST(Elementwise, IntegerUnaryOps) {
  Tensor x = from_vector<int64_t>({-3, 0, 4}, {3});
  EXPECT_EQ(unary(UnaryOp::Abs, x).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 4}));
  EXPECT_EQ(unary(UnaryOp::Relu, x).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 4}));
  EXPECT_EQ(unary(UnaryOp::Exp, x).dtype(), DType::F32);  // promoted, as PyTorch
}

TEST(Elementwise, ContiguousCopyOfTransposedViewsIsExact) {
  // The tiled path: last two dims transposed, odd sizes, a batch dim, every element size.
  manual_seed(6);
  for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::U8}) {
    Tensor base = cast(randn({3, 37, 50}) * 10.0, dt);
    Tensor t = base.as_strided({3, 50, 37}, {int64_t{37} * 50, 1, 50}, 0);  // transpose(1, 2)
    Tensor c = kernels::contiguous(t);
    ASSERT_TRUE(c.is_contiguous());
    EXPECT_EQ(c.to_vector<double>(), t.to_vector<double>()) << dtype_name(dt);
  }
}

// f32 tanh (and GELU's tanh form) use a vectorisable polynomial/exp formula instead of libm's
// tanhf: within 3 ulp of the exact value (computed in f64) across the range where tanh is not
// yet +-1, exactly +-1 beyond it, and NaN stays NaN.
TEST(Elementwise, FloatTanhIsWithinThreeUlpOfTheExactValue) {
  std::vector<float> xs;
  for (float x = -10.0f; x <= 10.0f; x += 0.00037f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-20f, 1e-7f, 0.6249f, 0.625f, 0.6251f, 9.1f, -9.1f, 50.0f, -100.0f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    xs.push_back(x);
  const int64_t n = static_cast<int64_t>(xs.size());
  Tensor x = from_vector(xs, {n});
  std::vector<float> y = unary(UnaryOp::Tanh, x).to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(std::tanh(static_cast<double>(xs[i])));
    const float ulp = std::nextafter(std::abs(want), std::numeric_limits<float>::infinity()) - std::abs(want);
    ASSERT_LE(std::abs(y[i] - want), 3 * ulp) << "tanh(" << xs[i] << ") = " << y[i] << ", exact " << want;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(unary(UnaryOp::Tanh, from_vector(std::vector<float>{nan}, {1})).item<float>()));
  EXPECT_TRUE(std::signbit(unary(UnaryOp::Tanh, from_vector(std::vector<float>{-0.0f}, {1})).item<float>()));
}
