// Activation checkpointing: the same gradients, bit for bit, as without it (dropout included),
// for inputs and parameters; lower peak activation memory on a deep stack; nesting; no graph
// outside grad mode; end-of-pass callbacks; in-place changes caught.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include "common/errors.h"

#include <cstring>
#include <memory>

using namespace brisk;

namespace {

struct Stack {
  std::vector<std::shared_ptr<nn::TransformerBlock>> blocks;
  Stack(int depth, int64_t c, int64_t heads, double dropout) {
    manual_seed(1234);
    for (int i = 0; i < depth; ++i)
      blocks.push_back(std::make_shared<nn::TransformerBlock>(c, heads, nn::AttentionOptions{.dropout = dropout}));
  }
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> ps;
    for (const auto& b : blocks)
      for (const Tensor& p : b->parameters()) ps.push_back(p);
    return ps;
  }
  void zero_grad() {
    for (auto& b : blocks) b->zero_grad();
  }
  Tensor forward(Tensor x, bool use_checkpoint) {
    for (auto& b : blocks) {
      if (use_checkpoint) {
        nn::TransformerBlock* blk = b.get();
        x = autograd::checkpoint([blk](const Tensor& h) { return (*blk)(h); }, x);
      } else {
        x = (*b)(x);
      }
    }
    return x;
  }
};

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) return false;
  std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  return std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
}

struct Grads {
  Tensor input;
  std::vector<Tensor> params;
  Generator::State rng_after{};
};

// One forward + backward of the stack from the same seed; gradients of the input and the parameters.
Grads run_stack(Stack& s, bool use_checkpoint, bool input_requires_grad = true) {
  s.zero_grad();
  manual_seed(77);
  Tensor x = randn({2, 8, 16});
  if (input_requires_grad) x.requires_grad_();
  Tensor y = s.forward(x, use_checkpoint);
  // A loss that weighs every output differently.
  Tensor w = arange(0.0, static_cast<double>(y.numel()), 1.0, {.dtype = DType::F32}).view(y.sizes()) * 0.01;
  (y * w).sum().backward();
  Grads g;
  g.input = input_requires_grad ? x.grad() : Tensor();
  for (const Tensor& p : s.parameters()) g.params.push_back(p.grad());
  g.rng_after = default_generator().state();
  return g;
}

void expect_same(const Grads& a, const Grads& b, bool with_input = true) {
  if (with_input) {
    EXPECT_TRUE(bit_identical(a.input, b.input)) << "input gradient differs";
  }
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_TRUE(bit_identical(a.params[i], b.params[i])) << "parameter " << i;
  EXPECT_EQ(a.rng_after.offset, b.rng_after.offset);
}

}  // namespace

TEST(Checkpoint, TransformerStackWithDropoutGivesBitIdenticalGradients) {
  Stack s(3, 16, 2, /*dropout=*/0.2);
  Grads plain = run_stack(s, false);
  Grads ckpt = run_stack(s, true);
  expect_same(plain, ckpt);
  // The check can fail: another dropout draw changes the gradients.
  s.zero_grad();
  manual_seed(78);
  Tensor x = randn({2, 8, 16});
  x.requires_grad_();
  manual_seed(5);
  s.forward(x, true).sum().backward();
  EXPECT_FALSE(bit_identical(plain.params[0], s.parameters()[0].grad()));
}

TEST(Checkpoint, RecomputationRunsUnderTheForwardsAutocastState) {
  // The forward under bf16 autocast, the backward outside it (as a training step does): the
  // recomputation must still run in bf16 to give the same gradients.
  Stack s(2, 16, 2, 0.1);
  auto run = [&](bool use_checkpoint) {
    s.zero_grad();
    manual_seed(77);
    Tensor x = randn({2, 8, 16});
    x.requires_grad_();
    Tensor loss;
    {
      amp::Autocast autocast(DType::BF16);
      loss = s.forward(x, use_checkpoint).to(DType::F32).sum();
    }
    loss.backward();
    Grads g;
    g.input = x.grad();
    for (const Tensor& p : s.parameters()) g.params.push_back(p.grad());
    g.rng_after = default_generator().state();
    return g;
  };
  Grads plain = run(false);
  Grads ckpt = run(true);
  expect_same(plain, ckpt);
}

TEST(Checkpoint, ParametersGetGradientsWhenTheInputNeedsNone) {
  Stack s(2, 16, 2, 0.1);
  Grads plain = run_stack(s, false, /*input_requires_grad=*/false);
  Grads ckpt = run_stack(s, true, /*input_requires_grad=*/false);
  for (const Tensor& g : ckpt.params) EXPECT_TRUE(g.defined());
  expect_same(plain, ckpt, /*with_input=*/false);
}

TEST(Checkpoint, WithoutPreservedRngDropoutMasksDiffer) {
  Stack s(1, 16, 2, 0.5);
  Grads plain = run_stack(s, false);
  s.zero_grad();
  manual_seed(77);
  Tensor x = randn({2, 8, 16});
  x.requires_grad_();
  Tensor y = autograd::checkpoint([&](const Tensor& h) { return (*s.blocks[0])(h); }, x, {.preserve_rng_state = false});
  Tensor w = arange(0.0, static_cast<double>(y.numel()), 1.0, {.dtype = DType::F32}).view(y.sizes()) * 0.01;
  (y * w).sum().backward();
  EXPECT_FALSE(bit_identical(plain.input, x.grad()));
}

TEST(Checkpoint, PeakActivationMemoryFallsForADeepStack) {
  Stack s(8, 32, 4, 0.1);
  auto peak_of = [&](bool use_checkpoint) {
    s.zero_grad();
    manual_seed(3);
    Tensor x = randn({4, 64, 32});
    x.requires_grad_();
    const int64_t before = memory_stats().current[static_cast<int>(MemoryCategory::Other)];
    reset_peak_memory_stats();
    s.forward(x, use_checkpoint).sum().backward();
    return memory_stats().peak[static_cast<int>(MemoryCategory::Other)] - before;
  };
  const int64_t plain = peak_of(false);
  const int64_t ckpt = peak_of(true);
  EXPECT_GT(plain, 0);
  EXPECT_LT(ckpt * 2, plain) << "peak activation bytes: " << ckpt << " with checkpointing, " << plain << " without";
}

TEST(Checkpoint, NestedCheckpointsGiveTheSameGradients) {
  Stack s(4, 16, 2, 0.2);
  Grads plain = run_stack(s, false);
  s.zero_grad();
  manual_seed(77);
  Tensor x = randn({2, 8, 16});
  x.requires_grad_();
  auto pair = [&](int first) {
    return [&s, first](const Tensor& h) {
      Tensor a = autograd::checkpoint([&s, first](const Tensor& t) { return (*s.blocks[first])(t); }, h);
      return autograd::checkpoint([&s, first](const Tensor& t) { return (*s.blocks[first + 1])(t); }, a);
    };
  };
  Tensor y = autograd::checkpoint(pair(0), x);
  y = autograd::checkpoint(pair(2), y);
  Tensor w = arange(0.0, static_cast<double>(y.numel()), 1.0, {.dtype = DType::F32}).view(y.sizes()) * 0.01;
  (y * w).sum().backward();
  Grads nested;
  nested.input = x.grad();
  for (const Tensor& p : s.parameters()) nested.params.push_back(p.grad());
  nested.rng_after = default_generator().state();
  expect_same(plain, nested);
}

TEST(Checkpoint, MultipleInputsAndOutputs) {
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor p = in[0] * in[1];
    return std::vector<Tensor>{p.tanh(), p + in[1], in[0].argmax(0)};
  };
  auto run = [&](bool use_checkpoint) {
    Tensor a = tensor<float>({0.5f, -1.f, 2.f}), b = tensor<float>({1.5f, 0.25f, -0.75f});
    Tensor c = tensor<float>({1.f, 2.f, 3.f});  // needs no gradient
    a.requires_grad_();
    b.requires_grad_();
    std::vector<Tensor> out = use_checkpoint ? autograd::checkpoint(fn, {a, b}) : fn({a, b});
    EXPECT_EQ(out.size(), 3u);
    EXPECT_EQ(out[2].dtype(), DType::I64);
    EXPECT_FALSE(out[2].requires_grad());
    // Only the first output is used by the loss: the second gets no gradient.
    ((out[0] * c).sum() + (out[1] * 0.0).sum()).backward();
    return std::make_pair(a.grad(), b.grad());
  };
  auto plain = run(false);
  auto ckpt = run(true);
  EXPECT_TRUE(bit_identical(plain.first, ckpt.first));
  EXPECT_TRUE(bit_identical(plain.second, ckpt.second));
}

TEST(Checkpoint, NoGradForwardRecordsNothingAndRunsOnce) {
  int calls = 0;
  Tensor w = tensor<float>({2.f, 3.f});
  w.requires_grad_();
  auto fn = [&](const Tensor& x) {
    ++calls;
    return x * w;
  };
  Tensor x = tensor<float>({1.f, 1.f});
  x.requires_grad_();
  {
    NoGradGuard no_grad;
    Tensor y = autograd::checkpoint(fn, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  EXPECT_EQ(calls, 1);
  // With grad mode on: once in the forward, once more in the backward.
  Tensor y = autograd::checkpoint(fn, x);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(calls, 2);
  y.sum().backward();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.f, 3.f}));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1.f, 1.f}));
}

TEST(Checkpoint, AFunctionReturningItsInputLeavesTheInputAlone) {
  Tensor x = tensor<float>({1.f, 2.f});
  x.requires_grad_();
  Tensor y = autograd::checkpoint([](const Tensor& t) { return t; }, x);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  (y * 3.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3.f, 3.f}));
}

// The output's storage may have been written in place inside the function (version > 0): the
// checkpoint's output is current as returned, and only a later in-place write makes it stale.
TEST(Checkpoint, AnOutputWrittenInPlaceInsideTheFunctionIsCurrent) {
  Tensor x = tensor<float>({1.f, 2.f});
  x.requires_grad_();
  Tensor y = autograd::checkpoint(
      [](const Tensor& t) {
        Tensor r = t * 2.0;
        NoGradGuard no_grad;
        r.add_(1.0);  // (a constant shift: the gradient stays 2)
        return r;
      },
      x);
  ASSERT_GT(y.version(), 0u);
  (y * 3.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{6.f, 6.f}));
  Tensor z = autograd::checkpoint([](const Tensor& t) { return t * 2.0; }, x);
  {
    NoGradGuard no_grad;
    z.add_(1.0);
  }
  EXPECT_THROW(z * 3.0, Error);
}

TEST(Checkpoint, ChangingAnInputInPlaceBeforeBackwardIsAnError) {
  Tensor a = tensor<float>({1.f, 2.f});
  a.requires_grad_();
  Tensor x = a * 1.0;  // non-leaf, so it may be changed in place
  Tensor y = autograd::checkpoint([](const Tensor& t) { return t * t; }, x);
  {
    NoGradGuard no_grad;
    x.add_(1.0);
  }
  EXPECT_THROW(y.sum().backward(), Error);
}

TEST(Checkpoint, HookCallbacksRunWhenTheOuterPassEnds) {
  // A parameter's hook inside the checkpoint queues an end-of-pass callback (as the data-parallel
  // Reducer does); it must run after the whole backward, when the earlier layer's gradient exists.
  Tensor w0 = tensor<float>({2.f});
  Tensor w1 = tensor<float>({3.f});
  w0.requires_grad_();
  w1.requires_grad_();
  bool w0_grad_seen = false, ran = false;
  w1.register_hook([&](const Tensor&) {
    autograd::queue_callback([&] {
      ran = true;
      w0_grad_seen = w0.grad().defined();
    });
  });
  Tensor x = tensor<float>({1.f});
  Tensor h = x * w0;
  Tensor y = autograd::checkpoint([&](const Tensor& t) { return t * w1; }, h);
  y.sum().backward();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(w0_grad_seen);
  EXPECT_FLOAT_EQ(w0.grad().item<float>(), 3.f);
  EXPECT_FLOAT_EQ(w1.grad().item<float>(), 2.f);
}

TEST(Checkpoint, RecomputationWithAnotherShapeIsAnError) {
  int calls = 0;
  Tensor x = tensor<float>({1.f, 2.f, 3.f});
  x.requires_grad_();
  Tensor y = autograd::checkpoint([&](const Tensor& t) { return ++calls == 1 ? t * 2.0 : slice(t, 0, 0, 2) * 2.0; }, x);
  EXPECT_THROW(y.sum().backward(), Error);
}

TEST(Checkpoint, AutogradGradThroughACheckpointIsRefused) {
  Tensor w = tensor<float>({2.f});
  w.requires_grad_();
  Tensor x = tensor<float>({3.f});
  x.requires_grad_();
  Tensor y = autograd::checkpoint([&](const Tensor& t) { return t * w; }, x);
  brisk::testing::expect_error([&] { autograd::grad({y.sum()}, {x}); }, "autograd::grad()");
  EXPECT_FALSE(w.grad().defined());
}

TEST(Checkpoint, RetainGraphRecomputesOnEveryBackward) {
  int calls = 0;
  Tensor w = tensor<float>({2.f, -1.f});
  w.requires_grad_();
  Tensor x = tensor<float>({3.f, 4.f});
  Tensor idx = tensor<int64_t>({1, 0});  // an integer input passes through untouched
  std::vector<Tensor> out = autograd::checkpoint(
      [&](const std::vector<Tensor>& in) {
        ++calls;
        return std::vector<Tensor>{(in[0] * w).index_select(0, in[1])};
      },
      {x, idx});
  Tensor loss = (out[0] * out[0]).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  EXPECT_EQ(calls, 3);  // the forward and one recomputation per backward
  // d/dw sum((x*w)^2) = 2 x^2 w, twice.
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{72.f, -64.f}));
}
