// Layers: shapes, PyTorch's default initialisation ranges, values against hand computation,
// train/eval behaviour, containers, and the attention block's causality.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

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

TEST(Activations, ModulesMatchTheOps) {
  Tensor x = from_vector<float>({-1, 0.5f}, {2});
  EXPECT_EQ(nn::ReLU()(x).to_vector<float>(), relu(x).to_vector<float>());
  EXPECT_EQ(nn::GELU("tanh")(x).to_vector<float>(), gelu(x, "tanh").to_vector<float>());
  EXPECT_EQ(nn::SiLU()(x).to_vector<float>(), silu(x).to_vector<float>());
  EXPECT_EQ(nn::Tanh()(x).to_vector<float>(), tanh(x).to_vector<float>());
  EXPECT_EQ(nn::Sigmoid()(x).to_vector<float>(), sigmoid(x).to_vector<float>());
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
