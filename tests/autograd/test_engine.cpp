// The backward engine: accumulation, retain_graph, grad mode, hooks, callbacks, deep chains,
// non-leaf gradients, autograd::grad, and custom differentiable functions.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include "common/gradcheck.h"

using namespace brisk;

namespace {
Tensor leaf_f32(std::initializer_list<float> v) {
  Tensor x = tensor<float>(v);
  x.requires_grad_();
  return x;
}
}  // namespace

TEST(Engine, ScalarSquareGradientIsTwoX) {
  Tensor x = leaf_f32({1.f, -2.f, 3.f});
  (x * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.f, -4.f, 6.f}));
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf_f32({1.f, 2.f});
  (x * 3.0).sum().backward();
  (x * 3.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{6.f, 6.f}));
}

TEST(Engine, ATensorUsedTwiceSumsBothPaths) {
  Tensor x = leaf_f32({2.f});
  Tensor y = x * x + x * 5.0;  // dy/dx = 2x + 5 = 9
  y.sum().backward();
  EXPECT_FLOAT_EQ(x.grad().item<float>(), 9.f);
}

TEST(Engine, SecondBackwardWithoutRetainGraphThrows) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor y = (x * x).sum();
  y.backward();
  try {
    y.backward();
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4.f, 8.f}));
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf_f32({1.f});
  Tensor y;
  {
    NoGradGuard ng;
    y = x * 2.0;
    EXPECT_FALSE(is_grad_enabled());
    {
      EnableGradGuard eg;
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), Error);
}

TEST(Engine, DetachCutsTheGraphButSharesStorage) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), y.data_ptr());
  Tensor z = (d * x).sum();  // gradient flows only through x: dz/dx = d = 2x
  z.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.f, 4.f}));
}

TEST(Engine, LeafHookFiresOnceWithTheFinalGradient) {
  Tensor x = leaf_f32({1.f, 2.f});
  int calls = 0;
  std::vector<float> seen;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    seen = g.to_vector<float>();
  });
  // x feeds three paths; the hook must see the sum of all, once.
  Tensor y = (x * 2.0).sum() + (x * x).sum() + x.sum();
  y.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{5.f, 7.f}));  // 2 + 2x + 1
}

TEST(Engine, HooksFireInReverseOrderOfUseLikeLayers) {
  // Three "layers": w1 used first in forward, so its gradient is final last.
  Tensor w1 = leaf_f32({1.f}), w2 = leaf_f32({2.f}), w3 = leaf_f32({3.f});
  std::vector<int> order;
  w1.register_hook([&](const Tensor&) { order.push_back(1); });
  w2.register_hook([&](const Tensor&) { order.push_back(2); });
  w3.register_hook([&](const Tensor&) { order.push_back(3); });
  Tensor x = tensor<float>({0.5f});
  Tensor h = tanh(x * w1);
  h = tanh(h * w2);
  h = tanh(h * w3);
  h.sum().backward();
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1}));
}

TEST(Engine, QueuedCallbacksRunAfterTheWholePass) {
  Tensor x = leaf_f32({1.f, 2.f});
  bool grad_ready_in_callback = false;
  int callbacks = 0;
  x.register_hook([&](const Tensor&) {
    autograd::queue_callback([&] {
      ++callbacks;
      grad_ready_in_callback = x.grad().defined();
      autograd::queue_callback([&] { ++callbacks; });  // callbacks may queue callbacks
    });
  });
  (x * x).sum().backward();
  EXPECT_EQ(callbacks, 2);
  EXPECT_TRUE(grad_ready_in_callback);
  EXPECT_FALSE(autograd::in_backward_pass());
  EXPECT_THROW(autograd::queue_callback([] {}), Error);
}

TEST(Engine, AHundredThousandNodeChainNeitherRecursesNorLeaks) {
  Tensor x = leaf_f32({1.f});
  int64_t before = memory_stats().total_current;
  {
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y * 1.0;
    y.sum().backward();
  }
  EXPECT_FLOAT_EQ(x.grad().item<float>(), 1.f);
  {
    // Built but never backpropagated: freeing the graph must not recurse either.
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y + 0.0;
  }
  EXPECT_LE(memory_stats().total_current - before, 1024) << "the graph's tensors were not freed";
}

TEST(Engine, SavedTensorsAreFreedAfterBackward) {
  Tensor x = leaf_f32({1.f});
  Tensor big = randn({256, 1024});  // 1 MiB, saved by mul for the gradient of x
  int64_t before;
  Tensor loss = (big * x).sum();
  big = Tensor();
  before = memory_stats().total_current;
  loss.backward();
  EXPECT_LE(memory_stats().total_current, before - 1000000) << "mul's saved input survived backward";
}

TEST(Engine, RetainGradKeepsANonLeafGradient) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor h = x * 3.0;
  h.retain_grad();
  (h * h).sum().backward();
  EXPECT_EQ(h.grad().to_vector<float>(), (std::vector<float>{6.f, 12.f}));  // 2h
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{18.f, 36.f}));
}

TEST(Engine, AutogradGradReturnsInsteadOfAccumulating) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor y = (x * x * x).sum();
  auto g = autograd::grad({y}, {x});
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{3.f, 12.f}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, BackwardOfANonScalarNeedsAGradient) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(), Error);
  y.backward(tensor<float>({1.f, 10.f}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.f, 20.f}));
}

TEST(Engine, GradientsAreCountedAsGradientMemory) {
  Tensor x = randn({1024});
  x.requires_grad_();
  int64_t before = memory_stats().current[static_cast<int>(MemoryCategory::Gradients)];
  (x * 2.0).sum().backward();
  int64_t after = memory_stats().current[static_cast<int>(MemoryCategory::Gradients)];
  EXPECT_EQ(after - before, 1024 * 4);
}

TEST(Engine, InPlaceUpdateOfALeafThatRequiresGradThrowsUnlessNoGrad) {
  Tensor w = leaf_f32({1.f});
  EXPECT_THROW(add_(w, tensor<float>({1.f})), Error);
  NoGradGuard ng;
  add_(w, tensor<float>({1.f}));
  EXPECT_FLOAT_EQ(w.item<float>(), 2.f);
}

// A user-defined op: y = x^3 with a hand-written backward.
struct Cube : autograd::Function<Cube> {
  static Tensor forward(autograd::FunctionCtx& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x * x;
  }
  static std::vector<Tensor> backward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    const Tensor& x = ctx.saved()[0];
    return {g[0] * 3.0 * x * x};
  }
};

// Two inputs and a non-tensor argument.
struct ScaledProduct : autograd::Function<ScaledProduct> {
  static Tensor forward(autograd::FunctionCtx& ctx, const Tensor& a, const Tensor& b, double s) {
    ctx.save_for_backward({a, b});
    ctx.values["s"] = s;
    return a * b * s;
  }
  static std::vector<Tensor> backward(autograd::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    double s = ctx.values["s"];
    const Tensor& a = ctx.saved()[0];
    const Tensor& b = ctx.saved()[1];
    return {ctx.needs_input_grad(0) ? g[0] * b * s : Tensor(), ctx.needs_input_grad(1) ? g[0] * a * s : Tensor()};
  }
};

TEST(CustomFunction, ForwardAndBackwardAreTheUsers) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor y = Cube::apply(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1.f, 8.f}));
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3.f, 12.f}));
}

TEST(CustomFunction, PassesAFiniteDifferenceCheck) {
  manual_seed(1);
  brisk::testing::expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) { return ScaledProduct::apply(Cube::apply(v[0]), v[1], 0.5); },
      {randn({2, 3}), randn({2, 3})}, "custom function");
}

TEST(CustomFunction, InputsThatNeedNoGradGetNone) {
  Tensor a = leaf_f32({2.f});
  Tensor b = tensor<float>({5.f});
  ScaledProduct::apply(a, b, 2.0).sum().backward();
  EXPECT_FLOAT_EQ(a.grad().item<float>(), 10.f);
  EXPECT_FALSE(b.grad().defined());
}

TEST(Engine, AGradientHasItsTensorsDtype) {
  // Under autocast a bf16 activation feeds f32 ops (a residual add, a norm): their backward hands
  // back f32 gradients, which the engine casts to the bf16 tensor's dtype before they flow on.
  Tensor x = kernels::cast(randn({4, 3}), DType::BF16).requires_grad_();
  Tensor h = x * 2.0;            // bf16, recorded
  Tensor y = h + randn({4, 3});  // bf16 + f32 promotes to f32
  ASSERT_EQ(y.dtype(), DType::F32);
  y.sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::BF16);
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(12, 2.f));
}

// An output that got no gradient reads as zeros in its node's backward, unless it is an integer
// output (max_pool2d's indices): that one can never carry a gradient and stays undefined, so no
// zero fill of its size runs on every step.
TEST(Engine, OnlyFloatingOutputsWithoutAGradientReadAsZeros) {
  Tensor x = leaf_f32({1.f, 2.f});
  Tensor values = x * 3.0, spare = x * 5.0;
  Tensor idx = zeros({2}, {.dtype = DType::I64});
  bool saw = false;
  std::vector<Tensor> outs = {values.detach(), spare.detach(), idx};
  autograd::record("three_outputs", {x}, outs, [&saw](const autograd::GradCtx& g) -> std::vector<Tensor> {
    saw = true;
    EXPECT_TRUE(g.grad(0).defined());
    EXPECT_TRUE(g.grad(1).defined());  // a float output nobody used: zeros
    EXPECT_EQ(g.grad(1).to_vector<float>(), std::vector<float>(2, 0.f));
    EXPECT_FALSE(g.grad(2).defined());  // the integer output: none
    return {g.grad(0)};
  });
  outs[0].sum().backward();
  EXPECT_TRUE(saw);
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(2, 1.f));
  // max_pool2d's backward runs with its indices output undefined.
  Tensor img = randn({1, 1, 4, 4}).requires_grad_();
  auto [pooled, indices] = max_pool2d_with_indices(img, 2);
  pooled.sum().backward();
  EXPECT_FLOAT_EQ(img.grad().sum().item<float>(), 4.f);
}

// set_grad_buffer: where a leaf's fresh gradient goes (the Reducer's shared buckets use it).
TEST(Engine, GradBufferReceivesAFreshGradientAndBecomesTheGrad) {
  Tensor x = leaf_f32({1.f, 2.f, 3.f});
  Tensor storage = zeros({5});
  Tensor slot = storage.narrow(0, 1, 3);  // a view into a larger buffer, as a bucket slot
  int asked = 0;
  autograd::set_grad_buffer(x, [&] {
    ++asked;
    return slot;
  });
  (x * 2.0).sum().backward();
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(x.grad().data_ptr(), slot.data_ptr());
  EXPECT_EQ(storage.to_vector<float>(), (std::vector<float>{0.f, 2.f, 2.f, 2.f, 0.f}));
  // A defined .grad accumulates in place; the buffer is not asked again.
  (x * 3.0).sum().backward();
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(storage.to_vector<float>(), (std::vector<float>{0.f, 5.f, 5.f, 5.f, 0.f}));
  // An undefined answer falls back to a fresh buffer; nullptr removes the provider.
  x.set_grad(Tensor());
  autograd::set_grad_buffer(x, [] { return Tensor(); });
  x.sum().backward();
  EXPECT_NE(x.grad().data_ptr(), slot.data_ptr());
  autograd::set_grad_buffer(x, nullptr);
  x.set_grad(Tensor());
  x.sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1.f, 1.f, 1.f}));
}

TEST(Engine, GradBufferOfTheWrongShapeOrANonLeafIsRefused) {
  Tensor x = leaf_f32({1.f, 2.f});
  autograd::set_grad_buffer(x, [] { return zeros({3}); });
  try {
    x.sum().backward();
    FAIL() << "a gradient buffer of the wrong shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient buffer"), std::string::npos) << e.what();
  }
  Tensor y = x * 2.0;
  EXPECT_THROW(autograd::set_grad_buffer(y, [] { return Tensor(); }), Error);
}
