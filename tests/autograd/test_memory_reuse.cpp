// Ops that write over memory nobody else can see (docs/how-brisk-works.md, "Reusing memory
// nobody else can see"): relu/sigmoid/tanh/exp given a temporary, and unary backward nodes
// writing the input's gradient over the output's. Each case checks both that the memory was
// (or was not) reused and that values and gradients are those of the allocating path.
#include <gtest/gtest.h>

#include <cstring>

#include <brisk/brisk.h>

#include "common/gradcheck.h"

using namespace brisk;

namespace {

Tensor leaf(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, {}, &g).requires_grad_();
}

std::vector<float> float_values(const Tensor& t) {
  return t.contiguous().to_vector<float>();
}

}  // namespace

TEST(MemoryReuse, ATemporaryIsOverwrittenWithTheSameValuesAndGradients) {
  for (auto [name, lvalue, rvalue] :
       std::vector<std::tuple<const char*, Tensor (*)(const Tensor&), Tensor (*)(Tensor &&)>>{
           {"relu", &relu, &relu}, {"sigmoid", &sigmoid, &sigmoid}, {"tanh", &tanh, &tanh}, {"exp", &exp, &exp}}) {
    SCOPED_TRACE(name);
    Tensor x = leaf({4, 5}, 1);
    Tensor h = x * 0.5;  // a non-leaf nobody else holds
    const void* bytes = h.data_ptr();
    Tensor y = rvalue(std::move(h));
    EXPECT_EQ(y.data_ptr(), bytes) << "the temporary's memory was not reused";
    Tensor want = lvalue(x * 0.5);  // (an rvalue too, but compared by value only)
    EXPECT_EQ(float_values(y), float_values(want));
    Generator g(7);
    Tensor w = randn({4, 5}, {}, &g);
    (y * w).sum().backward();
    Tensor gx = x.grad();
    x.set_grad(Tensor());
    Tensor h2 = x * 0.5;
    (lvalue(h2) * w).sum().backward();  // lvalue: allocates
    EXPECT_EQ(float_values(gx), float_values(x.grad()));
  }
}

TEST(MemoryReuse, AnythingElseSeeingTheBytesKeepsThemIntact) {
  Tensor x = leaf({6}, 2);
  {
    // A view of the temporary is alive.
    Tensor h = x * 1.0;
    Tensor v = h.narrow(0, 0, 3);
    const std::vector<float> before = float_values(v);
    Tensor y = relu(std::move(h));
    EXPECT_NE(y.data_ptr(), v.data_ptr());
    EXPECT_EQ(float_values(v), before);
  }
  {
    // Another handle on the same tensor.
    Tensor h = x * 1.0;
    Tensor other = h;
    Tensor y = relu(std::move(h));
    EXPECT_NE(y.data_ptr(), other.data_ptr());
    EXPECT_EQ(float_values(other), float_values(x));
  }
  {
    // exp saved its output for backward: relu of that output must leave it alone, and the
    // gradient through both is exp(x) * (exp(x) > 0) = exp(x).
    x.set_grad(Tensor());
    Tensor e = exp(x);
    const void* e_bytes = e.data_ptr();
    Tensor y = relu(std::move(e));
    EXPECT_NE(y.data_ptr(), e_bytes);
    y.sum().backward();
    EXPECT_EQ(float_values(x.grad()), float_values(exp(x.detach())));
  }
  {
    // A leaf that requires grad is never overwritten.
    Tensor l = leaf({6}, 3);
    const std::vector<float> before = float_values(l);
    const void* l_bytes = l.data_ptr();
    Tensor copy = l;  // (keeps a handle to look at afterwards)
    Tensor y = relu(std::move(l));
    EXPECT_NE(y.data_ptr(), l_bytes);
    EXPECT_EQ(float_values(copy), before);
  }
  {
    // Parameters' memory is not activation memory.
    Tensor p = zeros({6});
    p.storage()->set_category(MemoryCategory::Parameters);
    const void* p_bytes = p.data_ptr();
    Tensor y = relu(std::move(p));
    EXPECT_NE(y.data_ptr(), p_bytes);
  }
}

// A relu output's gradient also goes elsewhere: kept by retain_grad, or handed by add's backward
// to two relu nodes at once. The relu backward must not write over a gradient someone else reads.
TEST(MemoryReuse, BackwardWritesOverAGradientOnlyWhenNothingElseReadsIt) {
  Tensor p = leaf({8}, 4), q = leaf({8}, 5);
  Tensor a = relu(p * 1.0);
  Tensor b = relu(q * 1.0);
  a.retain_grad();
  Generator g(9);
  Tensor w = randn({8}, {}, &g);
  ((a + b) * w).sum().backward();
  EXPECT_EQ(float_values(a.grad()), float_values(w)) << "the retained gradient was overwritten";
  auto masked = [&](const Tensor& in) {
    std::vector<float> out = float_values(w), v = float_values(in);
    for (size_t i = 0; i < out.size(); ++i) out[i] = v[i] > 0 ? out[i] : 0.0f;
    return out;
  };
  EXPECT_EQ(float_values(p.grad()), masked(p));
  EXPECT_EQ(float_values(q.grad()), masked(q));
}

// A chain of temporaries in a model's shape: the same gradients as with every tensor kept, checked
// against finite differences in float64.
TEST(MemoryReuse, ChainsOfTemporariesPassTheGradientCheck) {
  Generator g(12);
  Tensor x = randn({3, 4}, {.dtype = DType::F64}, &g).requires_grad_();
  Tensor w = randn({4, 4}, {.dtype = DType::F64}, &g).requires_grad_();
  auto f = [](const std::vector<Tensor>& in) { return tanh(sigmoid(relu(matmul(in[0], in[1]) + 0.1)) * 2.0).sum(); };
  brisk::testing::expect_gradcheck(f, {x, w});
}

// Under activation checkpointing a function's output becomes the checkpoint's output (a detached
// handle with the checkpoint's history), then the next function's input, recomputed in backward.
TEST(MemoryReuse, CheckpointedLayersOfTemporariesTrainAsWithoutCheckpoint) {
  Generator g(21);
  nn::Linear l1(16, 16), l2(16, 16);
  Tensor x = randn({4, 16}, {}, &g), y = randn({4, 16}, {}, &g);
  auto run = [&](bool ckpt) {
    for (auto* l : {&l1, &l2})
      for (auto& p : l->parameters()) p.set_grad(Tensor());
    Tensor h = x;
    for (nn::Linear* l : {&l1, &l2}) {
      auto f = [l](const Tensor& t) { return tanh(l->forward(t)); };
      h = ckpt ? autograd::checkpoint(f, h) : f(h);
    }
    mse_loss(h, y).backward();
    std::vector<float> grads;
    for (auto* l : {&l1, &l2})
      for (auto& p : l->parameters()) {
        auto v = float_values(p.grad());
        grads.insert(grads.end(), v.begin(), v.end());
      }
    return grads;
  };
  EXPECT_EQ(run(true), run(false));
}

namespace {
// Hands back a gradient the test can recognise (and, with `keep`, holds on to it).
struct Recognised : autograd::Function<Recognised> {
  static inline const void* handed = nullptr;
  static inline bool keep = false;
  static inline Tensor kept;
  static Tensor forward(autograd::FunctionCtx&, const Tensor& x) { return x * 1.0; }
  static std::vector<Tensor> backward(autograd::FunctionCtx&, const std::vector<Tensor>& g) {
    Tensor out = g[0] * 2.0;
    handed = out.data_ptr();
    if (keep) kept = out;
    return {out};
  }
};
}  // namespace

// A leaf's first gradient: taken as it is when nothing else holds it (no copy), copied otherwise.
TEST(MemoryReuse, ALeafTakesOverAGradientNobodyElseHolds) {
  Tensor x = leaf({5}, 30);
  Recognised::keep = false;
  Recognised::apply(x).sum().backward();
  EXPECT_EQ(x.grad().data_ptr(), Recognised::handed);
  EXPECT_EQ(float_values(x.grad()), std::vector<float>(5, 2.f));
  EXPECT_EQ(x.grad().storage()->category(), MemoryCategory::Gradients);
  // Accumulation adds into it; a held gradient is copied, so changing .grad leaves it alone.
  Recognised::apply(x).sum().backward();
  EXPECT_EQ(float_values(x.grad()), std::vector<float>(5, 4.f));
  Tensor y = leaf({5}, 31);
  Recognised::keep = true;
  Recognised::apply(y).sum().backward();
  EXPECT_NE(y.grad().data_ptr(), Recognised::handed);
  kernels::fill_(y.grad(), 7.0);
  EXPECT_EQ(float_values(Recognised::kept), std::vector<float>(5, 2.f));
  Recognised::kept = Tensor();
}

// max_pool2d(relu(z)) with relu's output a temporary: the pooling takes relu's place in backward.
// The same gradient bits as relu and max_pool2d each recording their node, also when relu's output
// feeds another op too, when windows overlap (an argmax shared by windows), and when the pooled
// values are changed in place before backward (allowed, as without the fusion).
TEST(MemoryReuse, MaxPoolOfATemporaryReluGivesTheSameGradientBits) {
  Generator g(40);
  const Tensor z0 = randn({2, 3, 8, 8}, {}, &g), w = randn({2, 3, 4, 4}, {}, &g);
  const Tensor w3 = randn({2, 3, 7, 7}, {}, &g);
  auto grad_of = [&](int variant, bool fused) {
    Tensor z = z0.detach().requires_grad_();
    Tensor h = z * 1.5;
    Tensor loss;
    if (variant == 0) {  // the CNN's shape
      Tensor p = fused ? max_pool2d(relu(std::move(h)), 2) : max_pool2d(static_cast<const Tensor&>(relu(h)), 2);
      loss = (p * w).sum();
    } else if (variant == 1) {  // relu's output also feeds another op
      Tensor r = relu(h);
      Tensor other = (r + 1.0).sum();
      Tensor p = fused ? max_pool2d(std::move(r), 2) : max_pool2d(static_cast<const Tensor&>(r), 2);
      loss = (p * w).sum() + other;
    } else if (variant == 2) {  // overlapping windows: 2x2, stride 1
      Tensor p = fused ? max_pool2d(relu(std::move(h)), 2, {.stride = 1})
                       : max_pool2d(static_cast<const Tensor&>(relu(h)), 2, {.stride = 1});
      loss = (p * w3).sum();
    } else {  // the pooled values changed in place before backward
      Tensor p = fused ? max_pool2d(relu(std::move(h)), 2) : max_pool2d(static_cast<const Tensor&>(relu(h)), 2);
      p.mul_(3.0);
      loss = (p * w).sum();
    }
    loss.backward();
    return float_values(z.grad());
  };
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    const auto a = grad_of(variant, true), b = grad_of(variant, false);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
  // The fused node is what the profiler shows, and relu's own backward does not run.
  profiler::reset();
  profiler::enable();
  Tensor z = z0.detach().requires_grad_();
  (max_pool2d(relu(z * 1.5), 2) * w).sum().backward();
  profiler::disable();
  bool fused = false, relu_backward = false;
  for (const auto& r : profiler::key_averages()) {
    fused = fused || r.name == "ReluMaxPool2dBackward";
    relu_backward = relu_backward || r.name == "ReluBackward";
  }
  profiler::reset();
  EXPECT_TRUE(fused);
  EXPECT_FALSE(relu_backward);
}
