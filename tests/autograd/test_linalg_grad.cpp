// Gradients of matmul (every shape rule), linear and embedding: float64 central differences
// on contiguous and non-contiguous inputs, plus hand-checked cases.
#include <gtest/gtest.h>

#include <brisk/autograd/ops_loss.h>
#include <brisk/brisk.h>

#include "common/gradcheck.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;

TEST(MatmulGrad, VectorMatrixByHand) {
  // d(sum(a @ B))/da[k] = sum_j B[k, j]; d/dB[k, j] = a[k].
  Tensor a = tensor<double>({1, 2});
  Tensor b = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  a.requires_grad_();
  b.requires_grad_();
  matmul(a, b).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{6, 15}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 2, 2, 2}));
}

TEST(MatmulGrad, GradcheckEveryShapeCase) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3}, {3}},          {{3}, {3, 2}},       {{2, 3}, {3}},          {{2, 3}, {3, 4}},
      {{2, 2, 3}, {3, 2}}, {{2, 3}, {2, 3, 2}}, {{2, 2, 3}, {2, 3, 2}}, {{2, 1, 2, 3}, {3, 3, 1}},
      {{3}, {2, 3, 2}},    {{2, 2, 3}, {3}},
  };
  Generator gen(21);
  for (const auto& [sa, sb] : cases) {
    Tensor a = randn(sa, {.dtype = DType::F64}, &gen), b = randn(sb, {.dtype = DType::F64}, &gen);
    expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {a, b},
                             "matmul " + shape_str(sa) + " @ " + shape_str(sb));
  }
}

TEST(MatmulGrad, TransposedViewOperands) {
  Generator gen(22);
  Tensor a = randn({4, 3}, {.dtype = DType::F64}, &gen), b = randn({2, 4}, {.dtype = DType::F64}, &gen);
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return matmul(v[0].t(), v[1].t()); }, {a, b},
                           "matmul of transposes");
}

TEST(LinearGrad, GradcheckWithAndWithoutBias) {
  Generator gen(23);
  Tensor x = randn({2, 3, 4}, {.dtype = DType::F64}, &gen);
  Tensor w = randn({5, 4}, {.dtype = DType::F64}, &gen), b = randn({5}, {.dtype = DType::F64}, &gen);
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }, {x, w, b},
                           "linear with bias");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return linear(v[0], v[1]); },
                           {randn({3, 4}, {.dtype = DType::F64}, &gen), w}, "linear without bias");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); },
                           {randn({4}, {.dtype = DType::F64}, &gen), w, b}, "linear of a vector");
}

TEST(LinearGrad, MatchesMatmulPlusBias) {
  Generator gen(24);
  Tensor x = randn({6, 4}, {}, &gen), w = randn({3, 4}, {}, &gen), b = randn({3}, {}, &gen);
  Tensor x2 = x.clone(), w2 = w.clone(), b2 = b.clone();
  for (Tensor* t : {&x, &w, &b, &x2, &w2, &b2}) t->requires_grad_();
  (linear(x, w, b) * linear(x, w, b)).sum().backward();
  Tensor y2 = matmul(x2, w2.t()) + b2;
  (y2 * y2).sum().backward();
  for (auto [p, q] : {std::pair{&x, &x2}, std::pair{&w, &w2}, std::pair{&b, &b2}}) {
    std::vector<float> g1 = p->grad().to_vector<float>(), g2 = q->grad().to_vector<float>();
    for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g1[i], g2[i], 1e-4 * (1 + std::abs(g2[i])));
  }
}

TEST(EmbeddingGrad, GradcheckWeightWithRepeatsAndPadding) {
  Generator gen(25);
  Tensor idx = from_vector<int64_t>({1, 3, 1, 0, 2, 3}, {2, 3});
  Tensor w = randn({4, 3}, {.dtype = DType::F64}, &gen);
  expect_gradcheck_layouts([idx](const std::vector<Tensor>& v) { return embedding(idx, v[0]); }, {w}, "embedding");
  // With padding_idx the padding row's gradient is zero (and gradcheck would fail there, so check directly).
  Tensor wl = w.clone().detach();
  wl.requires_grad_();
  (embedding(idx, wl, /*padding_idx=*/1) * 2.0).sum().backward();
  std::vector<double> g = wl.grad().to_vector<double>();
  EXPECT_EQ(g, (std::vector<double>{2, 2, 2, 0, 0, 0, 2, 2, 2, 4, 4, 4}));
}

// The GELU MLP as one op: central differences in f64 (with and without biases, any layout); and
// on the CPU the same bits as the composite linear -> gelu(tanh) -> linear it replaces, for the
// output and every gradient, in f32 and under bf16 autocast.
TEST(GeluMlpGrad, GradcheckWithAndWithoutBiases) {
  Generator gen(26);
  Tensor x = randn({2, 3, 4}, {.dtype = DType::F64}, &gen);
  Tensor w1 = randn({8, 4}, {.dtype = DType::F64}, &gen), b1 = randn({8}, {.dtype = DType::F64}, &gen);
  Tensor w2 = randn({3, 8}, {.dtype = DType::F64}, &gen), b2 = randn({3}, {.dtype = DType::F64}, &gen);
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return gelu_mlp(v[0], v[1], v[2], v[3], v[4]); },
                           {x, w1, b1, w2, b2}, "gelu_mlp with biases");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return gelu_mlp(v[0], v[1], Tensor(), v[2], Tensor()); },
                           {x, w1, w2}, "gelu_mlp without biases");
}

TEST(GeluMlpGrad, SameBitsAsTheCompositeOnTheCpu) {
  for (bool autocast : {false, true}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "f32");
    Generator gen(27);
    const Tensor x0 = randn({3, 5, 16}, {}, &gen), w10 = randn({64, 16}, {}, &gen), b10 = randn({64}, {}, &gen);
    const Tensor w20 = randn({16, 64}, {}, &gen), b20 = randn({16}, {}, &gen), g = randn({3, 5, 16}, {}, &gen);
    auto run = [&](bool fused) {
      std::vector<Tensor> p;
      for (const Tensor& t : {x0, w10, b10, w20, b20}) p.push_back(t.clone().detach().requires_grad_());
      Tensor out;
      {
        amp::Autocast ac(DType::BF16, autocast);
        out = fused ? gelu_mlp(p[0], p[1], p[2], p[3], p[4])
                    : linear(gelu(linear(p[0], p[1], p[2]), GeluApproximation::Tanh), p[3], p[4]);
      }
      out.backward(g.to(out.dtype()));
      std::vector<Tensor> r{out.to(DType::F32)};
      for (const Tensor& t : p) r.push_back(t.grad());
      return r;
    };
    const std::vector<Tensor> fused = run(true), composite = run(false);
    const char* names[] = {"output", "x.grad", "w1.grad", "b1.grad", "w2.grad", "b2.grad"};
    for (size_t i = 0; i < fused.size(); ++i)
      EXPECT_EQ(fused[i].to_vector<float>(), composite[i].to_vector<float>()) << names[i];
  }
}

TEST(GeluMlpGrad, NoGradForwardMatchesAndInPlaceChangesAreRefused) {
  Generator gen(28);
  Tensor x = randn({4, 8}, {}, &gen), w1 = randn({32, 8}, {}, &gen), b1 = randn({32}, {}, &gen);
  Tensor w2 = randn({8, 32}, {}, &gen), b2 = randn({8}, {}, &gen);
  const Tensor composite = linear(gelu(linear(x, w1, b1), GeluApproximation::Tanh), w2, b2);
  {
    NoGradGuard no_grad;
    EXPECT_EQ(gelu_mlp(x, w1, b1, w2, b2).to_vector<float>(), composite.to_vector<float>());
  }
  // The op keeps x, w1 and w2 for backward: changing one in place after the forward is an error,
  // as for the composite, not a silently wrong gradient.
  w1.requires_grad_();
  Tensor y = gelu_mlp(x, w1, b1, w2, b2);
  {
    NoGradGuard no_grad;
    x.add_(1.0);
  }
  EXPECT_THROW(y.sum().backward(), Error);
}
