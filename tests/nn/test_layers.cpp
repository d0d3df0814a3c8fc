// Layers: shapes, PyTorch's default initialisation ranges, values against hand computation,
// train/eval behaviour, containers, and the attention block's causality.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <cmath>

#include "common/gradcheck.h"

using namespace brisk;

TEST(Linear, ComputesXWTransposePlusBias) {
  nn::Linear fc(3, 2);
  {
    NoGradGuard ng;
    copy_(fc.weight, from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
    copy_(fc.bias, from_vector<float>({0.5f, -1}, {2}));
  }
  Tensor y = fc(from_vector<float>({1, 0, -1, 2, 2, 2}, {2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-1.5f, -3, 12.5f, 29}));
  EXPECT_THROW(fc(zeros({2, 4})), Error);
}

TEST(Linear, DefaultInitIsUniformWithinOneOverSqrtFanIn) {
  manual_seed(0);
  nn::Linear fc(256, 64);
  const double bound = 1.0 / std::sqrt(256.0);
  auto w = fc.weight.to_vector<float>();
  double lo = 1, hi = -1;
  for (float v : w) lo = std::min<double>(lo, v), hi = std::max<double>(hi, v);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9 * bound);  // the range is used, not a narrower one
  EXPECT_GT(hi, 0.9 * bound);
  for (float v : fc.bias.to_vector<float>()) EXPECT_LE(std::fabs(v), bound);
}

TEST(Linear, SameSeedSameModel) {
  manual_seed(42);
  nn::Linear a(10, 10);
  manual_seed(42);
  nn::Linear b(10, 10);
  EXPECT_EQ(a.weight.to_vector<float>(), b.weight.to_vector<float>());
}

TEST(Conv2d, OutputShapeAndInitRange) {
  manual_seed(1);
  nn::Conv2d conv(3, 8, 3, {.stride = 2, .padding = 1});
  EXPECT_EQ(conv.weight.sizes(), (Shape{8, 3, 3, 3}));
  Tensor y = conv(randn({2, 3, 9, 9}));
  EXPECT_EQ(y.sizes(), (Shape{2, 8, 5, 5}));
  const double bound = 1.0 / std::sqrt(27.0);
  for (float v : conv.weight.to_vector<float>()) EXPECT_LE(std::fabs(v), bound);
  EXPECT_THROW(nn::Conv2d(3, 8, 3, {.groups = 2}), Error);
}

TEST(Pooling, LayersWrapTheOps) {
  Tensor x = arange(0.0, 16.0, 1.0, {.dtype = DType::F32}).view({1, 1, 4, 4});
  EXPECT_EQ(nn::MaxPool2d(2)(x).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(nn::AvgPool2d(2)(x).to_vector<float>(), (std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d({1, 1})(x).to_vector<float>(), (std::vector<float>{7.5f}));
}

TEST(BatchNorm2d, TrainingUsesBatchStatisticsAndUpdatesRunningStats) {
  nn::BatchNorm2d bn(2);
  // channel 0: values 1..4, channel 1: constant 5 over a (2, 2, 1, 2) input
  Tensor x = from_vector<float>({1, 2, 5, 5, 3, 4, 5, 5}, {2, 2, 1, 2});
  Tensor y = bn(x);
  const double m = 2.5, v = 1.25;  // biased variance of {1,2,3,4}
  auto out = y.to_vector<float>();
  EXPECT_NEAR(out[0], (1 - m) / std::sqrt(v + 1e-5), 1e-5);
  EXPECT_NEAR(out[5], (4 - m) / std::sqrt(v + 1e-5), 1e-5);
  EXPECT_NEAR(out[2], 0.0, 1e-5);
  auto rm = bn.running_mean.to_vector<float>();
  auto rv = bn.running_var.to_vector<float>();
  EXPECT_NEAR(rm[0], 0.1 * 2.5, 1e-6);
  EXPECT_NEAR(rm[1], 0.1 * 5, 1e-6);
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * (5.0 / 3.0), 1e-6);  // unbiased variance 5/3 in the running stat
  EXPECT_NEAR(rv[1], 0.9, 1e-6);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
}

TEST(BatchNorm2d, EvalUsesRunningStatistics) {
  nn::BatchNorm2d bn(1);
  {
    NoGradGuard ng;
    fill_(bn.running_mean, 2.0);
    fill_(bn.running_var, 4.0);
  }
  bn.eval();
  Tensor y = bn(full({1, 1, 1, 1}, 6.0));
  EXPECT_NEAR(y.item<float>(), 4.0 / std::sqrt(4.0 + 1e-5), 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
}

TEST(BatchNorm, GradientsPassAFiniteDifferenceCheck) {
  manual_seed(3);
  nn::BatchNorm1d bn(3);
  bn.to(DType::F64);
  Tensor w = bn.weight, b = bn.bias;
  brisk::testing::expect_gradcheck_layouts(
      [&](const std::vector<Tensor>& v) {
        NoGradGuard ng;  // keep running-stat updates out of the check's repeated forwards
        EnableGradGuard eg;
        return bn(v[0]) * v[1];
      },
      {randn({4, 3}), randn({4, 3})}, "batchnorm1d");
}

namespace {
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}
}  // namespace

// nn::BatchNorm runs one fused kernel; before, it composed mean, var, rsqrt and broadcasting
// ops. Both must give the same values, running statistics and gradients in f64.
TEST(BatchNorm, FusedKernelMatchesTheComposedFormulaInF64) {
  manual_seed(11);
  for (bool training : {true, false}) {
    nn::BatchNorm2d bn(3);
    bn.to(DType::F64);
    {
      NoGradGuard ng;
      copy_(bn.weight, randn({3}, {.dtype = DType::F64}));
      copy_(bn.bias, randn({3}, {.dtype = DType::F64}));
      copy_(bn.running_mean, randn({3}, {.dtype = DType::F64}));
      copy_(bn.running_var, rand({3}, {.dtype = DType::F64}) + 0.5);
    }
    if (!training) bn.eval();
    const Tensor rm0 = bn.running_mean.clone(), rv0 = bn.running_var.clone();
    Tensor x = randn({4, 3, 5, 2}, {.dtype = DType::F64}) * 3.0 + 1.5;
    x.requires_grad_();
    Tensor y = bn(x);
    Tensor g = randn(y.sizes(), {.dtype = DType::F64});
    (y * g).sum().backward();

    Tensor xr = x.detach().clone(), wr = bn.weight.detach().clone(), br = bn.bias.detach().clone();
    for (Tensor* t : {&xr, &wr, &br}) t->requires_grad_();
    const Shape bshape{1, 3, 1, 1};
    const std::vector<int64_t> dims{0, 2, 3};
    Tensor m = training ? mean(xr, dims, /*keepdim=*/true) : rm0.view(bshape);
    Tensor v = training ? var(xr, dims, /*correction=*/0, /*keepdim=*/true) : rv0.view(bshape);
    Tensor yr = (xr - m) * rsqrt(v + 1e-5) * wr.view(bshape) + br.view(bshape);
    (yr * g).sum().backward();

    const char* mode = training ? "training" : "eval";
    EXPECT_LE(max_abs_diff(y, yr), 1e-12) << mode;
    EXPECT_LE(max_abs_diff(x.grad(), xr.grad()), 1e-12) << mode;
    EXPECT_LE(max_abs_diff(bn.weight.grad(), wr.grad()), 1e-12) << mode;
    EXPECT_LE(max_abs_diff(bn.bias.grad(), br.grad()), 1e-12) << mode;
    if (training) {
      const double n = 4 * 5 * 2;
      Tensor want_rm = rm0 * 0.9 + m.detach().view({3}) * 0.1;
      Tensor want_rv = rv0 * 0.9 + v.detach().view({3}) * (0.1 * n / (n - 1));
      EXPECT_LE(max_abs_diff(bn.running_mean, want_rm), 1e-12);
      EXPECT_LE(max_abs_diff(bn.running_var, want_rv), 1e-12);
    } else {
      EXPECT_EQ(max_abs_diff(bn.running_mean, rm0), 0.0);
      EXPECT_EQ(max_abs_diff(bn.running_var, rv0), 0.0);
    }
  }
}

TEST(LayerNorm, NormalisesTheLastDims) {
  nn::LayerNorm ln(Shape{4});
  Tensor y = ln(from_vector<float>({1, 2, 3, 4}, {1, 4}));
  auto v = y.to_vector<float>();
  EXPECT_NEAR(v[0], -1.5 / std::sqrt(1.25 + 1e-5), 1e-5);
  EXPECT_EQ(ln.named_parameters().size(), 2u);
}

TEST(Embedding, PaddingRowStartsAtZeroAndGetsNoGradient) {
  nn::Embedding emb(5, 3, {.padding_idx = 0});
  EXPECT_EQ(emb.weight.select(0, 0).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  emb(from_vector<int64_t>({0, 2, 2}, {3})).sum().backward();
  auto g = emb.weight.grad().to_vector<float>();
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[6], 2);  // row 2 used twice
}

TEST(Dropout, ActiveInTrainingIdentityInEval) {
  manual_seed(5);
  nn::Dropout d(0.5);
  Tensor x = ones({1000});
  auto v = d(x).to_vector<float>();
  int zeros_seen = 0;
  for (float e : v) {
    EXPECT_TRUE(e == 0.0f || e == 2.0f);
    zeros_seen += e == 0.0f;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  d.eval();
  EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());
}

TEST(Sequential, ChainsChildrenAndNamesThemByIndex) {
  manual_seed(2);
  auto fc1 = std::make_shared<nn::Linear>(4, 8);
  nn::Sequential seq{fc1, std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 2)};
  EXPECT_EQ(seq(randn({3, 4})).sizes(), (Shape{3, 2}));
  auto names = seq.named_parameters();
  EXPECT_EQ(names[0].first, "0.weight");
  EXPECT_EQ(names[3].first, "2.bias");
  EXPECT_EQ(&seq.at<nn::Linear>(0), fc1.get());
  EXPECT_THROW(seq[3], Error);
}

// The activation modules against the textbook formulas, written out here in long double
// (not against the ops they call): across the range where each changes shape, out to where it
// saturates, in f64 (to a few ulps), f32 (to float rounding), and bf16/f16 (to their rounding).
namespace {

using Formula = long double (*)(long double);
long double relu_ref(long double x) {
  return x > 0 ? x : 0;
}
long double gelu_erf_ref(long double x) {
  return 0.5L * x * (1 + std::erf(x / std::sqrt(2.0L)));
}
long double gelu_tanh_ref(long double x) {
  const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  return 0.5L * x * (1 + std::tanh(k * (x + 0.044715L * x * x * x)));
}
long double silu_ref(long double x) {
  return x / (1 + std::exp(-x));
}
long double tanh_ref(long double x) {
  return std::tanh(x);
}
long double sigmoid_ref(long double x) {
  return 1 / (1 + std::exp(-x));
}

std::vector<double> activation_inputs() {
  std::vector<double> v = {-40,  -20,  -9.5, -3, -1,  -0.5, -1e-3, -1e-30, 0, 1e-30,
                           1e-3, 0.25, 0.5,  1,  2.5, 3,    9.5,   20,     40};
  for (int i = -60; i <= 60; ++i) v.push_back(i / 10.0);  // -6 .. 6 in steps of 0.1
  return v;
}

// x_scaled: GELU's x (1 + erf(..)) cancels for negative x, so its error is relative to |x| there.
void expect_matches_formula(nn::Module& m, Formula f, const char* what, bool x_scaled = false) {
  const std::vector<double> xs = activation_inputs();
  const int64_t n = static_cast<int64_t>(xs.size());
  struct Case {
    DType dt;
    double rtol, atol;
  };
  // bf16 and f16: two units in the last place of the result; f32 and f64: computing error.
  for (const Case& c : {Case{DType::F64, 1e-14, 0}, Case{DType::F32, 1e-5, 0}, Case{DType::BF16, 1.6e-2, 0},
                        Case{DType::F16, 2e-3, 6e-8}}) {
    Tensor x = kernels::cast(from_vector<double>(xs, {n}), c.dt);
    Tensor y = m.forward(x);
    ASSERT_EQ(y.dtype(), c.dt) << what;
    ASSERT_EQ(y.sizes(), x.sizes()) << what;
    const std::vector<double> in = x.to_vector<double>(), out = y.to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      // The formula at the input as stored in this dtype, rounded to the dtype like the output.
      const double want =
          kernels::cast(full({}, static_cast<double>(f(static_cast<long double>(in[i]))), {.dtype = DType::F64}), c.dt)
              .item<double>();
      const double tol = c.atol + c.rtol * (std::fabs(want) + (x_scaled ? std::fabs(in[i]) : 0.0));
      EXPECT_LE(std::fabs(out[i] - want), tol)
          << what << " " << dtype_name(c.dt) << " at x = " << in[i] << ": got " << out[i] << ", formula " << want;
    }
  }
}

}  // namespace

TEST(Activations, ModulesMatchTheFormulas) {
  nn::ReLU relu;
  nn::GELU gelu, gelu_tanh(GeluApproximation::Tanh);
  nn::SiLU silu;
  nn::Tanh th;
  nn::Sigmoid sig;
  expect_matches_formula(relu, relu_ref, "ReLU");
  expect_matches_formula(gelu, gelu_erf_ref, "GELU", true);
  expect_matches_formula(gelu_tanh, gelu_tanh_ref, "GELU(tanh)", true);
  expect_matches_formula(silu, silu_ref, "SiLU");
  expect_matches_formula(th, tanh_ref, "Tanh");
  expect_matches_formula(sig, sigmoid_ref, "Sigmoid");
  EXPECT_THROW(nn::GELU(parse_enum<GeluApproximation>("fast", "GELU approximate"))(ones({2})), Error);
}

TEST(Activations, HandValuesAndShapes) {
  // A few values worked out by hand (to 1e-6): GELU(1) = Phi(1) = 0.841345, its tanh form
  // 0.841192, SiLU(1) = 1 / (1 + e^-1) = 0.731059, sigmoid(0) = 1/2, tanh(1) = 0.761594.
  Tensor one = full({1}, 1.0, {.dtype = DType::F64});
  EXPECT_NEAR(nn::GELU()(one).item<double>(), 0.841345, 1e-6);
  EXPECT_NEAR(nn::GELU(GeluApproximation::Tanh)(one).item<double>(), 0.841192, 1e-6);
  EXPECT_NEAR(nn::SiLU()(one).item<double>(), 0.731059, 1e-6);
  EXPECT_NEAR(nn::Tanh()(one).item<double>(), 0.761594, 1e-6);
  EXPECT_EQ(nn::Sigmoid()(zeros({1})).item<float>(), 0.5f);
  EXPECT_EQ(nn::ReLU()(from_vector<float>({-2, 3}, {2})).to_vector<float>(), (std::vector<float>{0, 3}));
  // Any shape, element by element.
  Tensor x = arange(-12.0, 12.0, 1.0, {.dtype = DType::F32}).view({2, 3, 4});
  EXPECT_EQ(nn::ReLU()(x).sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(nn::Flatten()(zeros({2, 3, 4})).sizes(), (Shape{2, 12}));
}

TEST(Attention, OutputAtPositionTIgnoresLaterPositions) {
  manual_seed(7);
  nn::CausalSelfAttention attn(8, 2);
  Tensor x = randn({1, 5, 8});
  Tensor y = attn(x);
  EXPECT_EQ(y.sizes(), (Shape{1, 5, 8}));
  // Change only the last position: outputs 0..3 stay identical.
  Tensor x2 = x.clone().detach();
  {
    NoGradGuard ng;
    copy_(x2.select(1, 4), randn({1, 8}));
  }
  Tensor y2 = attn(x2);
  auto a = y.narrow(1, 0, 4).to_vector<float>(), b = y2.narrow(1, 0, 4).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(y.select(1, 4).to_vector<float>(), y2.select(1, 4).to_vector<float>());
}

TEST(Attention, TransformerBlockTrainsEveryParameter) {
  manual_seed(8);
  nn::TransformerBlock block(16, 4);
  EXPECT_EQ(block.named_parameters().size(), 12u);  // ln_1(2) attn(4) ln_2(2) c_fc(2) c_proj(2)
  block(randn({2, 3, 16})).sum().backward();
  for (auto& [name, p] : block.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(Attention, GradientsPassAFiniteDifferenceCheck) {
  manual_seed(9);
  nn::CausalSelfAttention attn(4, 2);
  attn.to(DType::F64);
  brisk::testing::expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return attn(v[0]); }, {randn({1, 3, 4})},
                                           "attention");
}
