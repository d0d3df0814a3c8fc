// The libtorch-style Tensor methods: each one against its free function (same values, bit for
// bit), a float64 gradient check of the method form where it is differentiable, the in-place
// methods, and the version check that refuses a backward through a tensor changed in place.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/gradcheck.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::error_of;
using brisk::testing::expect_error;
using brisk::testing::expect_gradcheck_layouts;
using brisk::testing::seeded_randn;

namespace {

// Positive values away from 0 (log, sqrt, rsqrt, pow with a tensor exponent).
Tensor positive(const Shape& s, uint64_t seed) {
  Generator gen(seed);
  return rand(s, {.dtype = DType::F64}, &gen) + 0.5;
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  EXPECT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_EQ(a.to(DType::F64).to_vector<double>(), b.to(DType::F64).to_vector<double>()) << what;
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> method;
  std::function<Tensor(const Tensor&)> free;
  bool positive_only;
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"abs", [](const Tensor& x) { return x.abs(); }, [](const Tensor& x) { return abs(x); }, false},
      {"neg", [](const Tensor& x) { return x.neg(); }, [](const Tensor& x) { return neg(x); }, false},
      {"exp", [](const Tensor& x) { return x.exp(); }, [](const Tensor& x) { return exp(x); }, false},
      {"log", [](const Tensor& x) { return x.log(); }, [](const Tensor& x) { return log(x); }, true},
      {"log1p", [](const Tensor& x) { return x.log1p(); }, [](const Tensor& x) { return log1p(x); }, true},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, [](const Tensor& x) { return sqrt(x); }, true},
      {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }, [](const Tensor& x) { return rsqrt(x); }, true},
      {"square", [](const Tensor& x) { return x.square(); }, [](const Tensor& x) { return square(x); }, false},
      {"pow scalar", [](const Tensor& x) { return x.pow(2.5); }, [](const Tensor& x) { return pow(x, 2.5); }, true},
      {"sin", [](const Tensor& x) { return x.sin(); }, [](const Tensor& x) { return sin(x); }, false},
      {"cos", [](const Tensor& x) { return x.cos(); }, [](const Tensor& x) { return cos(x); }, false},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, [](const Tensor& x) { return tanh(x); }, false},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, [](const Tensor& x) { return sigmoid(x); }, false},
      {"relu", [](const Tensor& x) { return x.relu(); }, [](const Tensor& x) { return relu(x); }, false},
      {"gelu", [](const Tensor& x) { return x.gelu(); }, [](const Tensor& x) { return gelu(x); }, false},
      {"gelu tanh", [](const Tensor& x) { return x.gelu(GeluApproximation::Tanh); },
       [](const Tensor& x) { return gelu(x, GeluApproximation::Tanh); }, false},
      {"silu", [](const Tensor& x) { return x.silu(); }, [](const Tensor& x) { return silu(x); }, false},
      {"clamp", [](const Tensor& x) { return x.clamp(-0.5, 0.7); }, [](const Tensor& x) { return clamp(x, -0.5, 0.7); },
       false},
      {"clamp_min", [](const Tensor& x) { return x.clamp_min(-0.2); },
       [](const Tensor& x) { return clamp(x, -0.2, std::nullopt); }, false},
      {"clamp_max", [](const Tensor& x) { return x.clamp_max(0.3); },
       [](const Tensor& x) { return clamp(x, std::nullopt, 0.3); }, false},
      {"add scalar", [](const Tensor& x) { return x.add(0.2); }, [](const Tensor& x) { return x + 0.2; }, false},
      {"sub scalar", [](const Tensor& x) { return x.sub(0.2); }, [](const Tensor& x) { return x - 0.2; }, false},
      {"mul scalar", [](const Tensor& x) { return x.mul(3.0); }, [](const Tensor& x) { return x * 3.0; }, false},
      {"div scalar", [](const Tensor& x) { return x.div(4.0); }, [](const Tensor& x) { return x / 4.0; }, false},
      {"softmax", [](const Tensor& x) { return x.softmax(1); }, [](const Tensor& x) { return softmax(x, 1); }, false},
      {"log_softmax", [](const Tensor& x) { return x.log_softmax(-1); },
       [](const Tensor& x) { return log_softmax(x, -1); }, false},
      {"cumsum", [](const Tensor& x) { return x.cumsum(1); }, [](const Tensor& x) { return cumsum(x, 1); }, false},
      {"tril", [](const Tensor& x) { return x.tril(); }, [](const Tensor& x) { return tril(x); }, false},
      {"triu 1", [](const Tensor& x) { return x.triu(1); }, [](const Tensor& x) { return triu(x, 1); }, false},
      {"masked_fill",
       [](const Tensor& x) {
         return x.masked_fill(tensor<bool>({true, false, true, false}), -1.5);
       },
       [](const Tensor& x) {
         return masked_fill(x, tensor<bool>({true, false, true, false}), -1.5);
       },
       false},
  };
  return cases;
}

}  // namespace

TEST(TensorMethods, UnaryMatchFreeFunctions) {
  for (const UnaryCase& c : unary_cases()) {
    const Tensor x = c.positive_only ? positive({3, 4}, 1) : seeded_randn({3, 4}, 1);
    expect_same(c.method(x), c.free(x), c.name);
    const Tensor xf = x.to(DType::F32);
    expect_same(c.method(xf), c.free(xf), std::string(c.name) + " f32");
  }
}

TEST(TensorMethods, UnaryGradcheck) {
  for (const UnaryCase& c : unary_cases()) {
    const Tensor x = c.positive_only ? positive({3, 4}, 2) : seeded_randn({3, 4}, 2);
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return c.method(v[0]); }, {x}, c.name);
  }
}

TEST(TensorMethods, ChainReadsLeftToRight) {
  const Tensor x = seeded_randn({2, 3}, 3);
  expect_same(x.abs().add(0.2).pow(2.5).sum(), sum(pow(abs(x) + 0.2, 2.5)), "chain");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return v[0].abs().add(0.2).pow(2.5).sum(); }, {x},
                           "chain");
}

TEST(TensorMethods, BinaryMatchFreeFunctionsAndGradcheck) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> method, free;
  };
  const std::vector<Case> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return a.add(b); },
       [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"add alpha", [](const Tensor& a, const Tensor& b) { return a.add(b, 0.5); },
       [](const Tensor& a, const Tensor& b) { return add(a, b, 0.5); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a.sub(b); },
       [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"sub alpha", [](const Tensor& a, const Tensor& b) { return a.sub(b, 2.0); },
       [](const Tensor& a, const Tensor& b) { return add(a, b, -2.0); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a.mul(b); },
       [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return a.div(b); },
       [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"pow tensor", [](const Tensor& a, const Tensor& b) { return a.pow(b); },
       [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"where", [](const Tensor& a, const Tensor& b) { return a.where(a > 0.9, b); },
       [](const Tensor& a, const Tensor& b) { return where(a > 0.9, a, b); }},
      {"matmul", [](const Tensor& a, const Tensor& b) { return a.matmul(b.t()); },
       [](const Tensor& a, const Tensor& b) { return matmul(a, b.t()); }},
      {"mm", [](const Tensor& a, const Tensor& b) { return a.mm(b.t()); },
       [](const Tensor& a, const Tensor& b) { return matmul(a, b.t()); }},
  };
  const Tensor a = positive({3, 4}, 4), b = positive({3, 4}, 5);
  for (const Case& c : cases) {
    expect_same(c.method(a, b), c.free(a, b), c.name);
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return c.method(v[0], v[1]); }, {a, b}, c.name);
  }
  // Broadcasting like the free functions.
  const Tensor row = seeded_randn({4}, 6);
  expect_same(a.add(row), a + row, "add broadcast");
  expect_same(a.mul(row), a * row, "mul broadcast");
  expect_error([&] { (void)a.mm(row); }, "mm: expects two 2-D tensors");
}

TEST(TensorMethods, Comparisons) {
  const Tensor a = tensor<double>({1.0, 2.0, 3.0}), b = tensor<double>({3.0, 2.0, 1.0});
  expect_same(a.eq(b), eq(a, b), "eq");
  expect_same(a.ne(b), ne(a, b), "ne");
  expect_same(a.lt(b), lt(a, b), "lt");
  expect_same(a.le(b), le(a, b), "le");
  expect_same(a.gt(b), gt(a, b), "gt");
  expect_same(a.ge(b), ge(a, b), "ge");
  EXPECT_EQ(a.eq(2.0).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(a.ne(2.0).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(a.lt(2.0).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(a.le(2.0).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(a.gt(2.0).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(a.ge(2.0).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(a.gt(b).dtype(), DType::Bool);
}

TEST(TensorMethods, ReductionsMatchFreeFunctionsAndGradcheck) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> method, free;
  };
  const std::vector<Case> cases = {
      {"sum all", [](const Tensor& x) { return x.sum(); }, [](const Tensor& x) { return sum(x); }},
      {"sum dims keepdim",
       [](const Tensor& x) {
         return x.sum({0, 2}, true);
       },
       [](const Tensor& x) {
         return sum(x, {0, 2}, true);
       }},
      {"sum int dim", [](const Tensor& x) { return x.sum(1); }, [](const Tensor& x) { return sum(x, {1}); }},
      {"mean dims", [](const Tensor& x) { return x.mean({-1}); }, [](const Tensor& x) { return mean(x, {-1}); }},
      {"mean int dim keepdim", [](const Tensor& x) { return x.mean(0, true); },
       [](const Tensor& x) { return mean(x, {0}, true); }},
      {"prod", [](const Tensor& x) { return x.prod(1); }, [](const Tensor& x) { return prod(x, {1}); }},
      {"sum vector dims",
       [](const Tensor& x) {
         return x.sum(std::vector<int64_t>{1, 2});
       },
       [](const Tensor& x) {
         return sum(x, {1, 2});
       }},
      {"sum empty braces = all", [](const Tensor& x) { return x.sum({}); }, [](const Tensor& x) { return sum(x); }},
      {"prod all", [](const Tensor& x) { return x.prod(); }, [](const Tensor& x) { return prod(x); }},
      {"amax", [](const Tensor& x) { return x.amax(2, true); }, [](const Tensor& x) { return amax(x, {2}, true); }},
      {"amin",
       [](const Tensor& x) {
         return x.amin({0, 1});
       },
       [](const Tensor& x) {
         return amin(x, {0, 1});
       }},
      {"logsumexp", [](const Tensor& x) { return x.logsumexp(-1); },
       [](const Tensor& x) { return logsumexp(x, {-1}); }},
      {"logsumexp all", [](const Tensor& x) { return x.logsumexp(); }, [](const Tensor& x) { return logsumexp(x); }},
      {"var", [](const Tensor& x) { return x.var(1); }, [](const Tensor& x) { return var(x, {1}); }},
      {"var correction 0 keepdim",
       [](const Tensor& x) {
         return x.var({0, 2}, 0, true);
       },
       [](const Tensor& x) {
         return var(x, {0, 2}, 0, true);
       }},
      {"std", [](const Tensor& x) { return x.std(); }, [](const Tensor& x) { return std_dev(x); }},
      {"std dim correction 2", [](const Tensor& x) { return x.std(2, 2); },
       [](const Tensor& x) { return std_dev(x, {2}, 2); }},
      {"max all", [](const Tensor& x) { return x.max(); }, [](const Tensor& x) { return max(x); }},
      {"min all", [](const Tensor& x) { return x.min(); }, [](const Tensor& x) { return min(x); }},
      {"max dim values", [](const Tensor& x) { return x.max(1).values; },
       [](const Tensor& x) { return max(x, 1).values; }},
      {"min dim keepdim values", [](const Tensor& x) { return x.min(-1, true).values; },
       [](const Tensor& x) { return min(x, -1, true).values; }},
  };
  const Tensor x = seeded_randn({2, 3, 4}, 7);
  for (const Case& c : cases) {
    expect_same(c.method(x), c.free(x), c.name);
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return c.method(v[0]); }, {x}, c.name);
  }
}

TEST(TensorMethods, MaxMinAlongDimGiveValuesAndIndices) {
  const Tensor x = tensor<double>({1.0, 5.0, 2.0, 7.0, 0.0, 3.0}).view({2, 3});
  auto [v, i] = x.max(1);
  EXPECT_EQ(v.to_vector<double>(), (std::vector<double>{5.0, 7.0}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(i.dtype(), DType::I64);
  std::tuple<Tensor, Tensor> t = x.min(0, true);  // libtorch's return type
  EXPECT_EQ(std::get<0>(t).sizes(), (Shape{1, 3}));
  EXPECT_EQ(std::get<1>(t).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0}));
  // The gradient of values goes to the chosen index only.
  Tensor leaf = x.detach().clone();
  leaf.requires_grad_();
  leaf.max(1).values.sum().backward();
  EXPECT_EQ(leaf.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 1, 0, 0}));
}

TEST(TensorMethods, ArgmaxArgmin) {
  const Tensor x = seeded_randn({3, 5}, 8);
  expect_same(x.argmax(), argmax(x), "argmax all");
  expect_same(x.argmax(1), argmax(x, 1), "argmax dim");
  expect_same(x.argmin(0, true), argmin(x, 0, true), "argmin dim keepdim");
  expect_same(x.argmin(), argmin(x), "argmin all");
}

TEST(TensorMethods, IndexSelectAndGather) {
  const Tensor x = seeded_randn({3, 4}, 9);
  const Tensor idx = tensor<int64_t>({2, 0, 2});
  expect_same(x.index_select(0, idx), index_select(x, 0, idx), "index_select");
  expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return v[0].index_select(1, idx); }, {x},
                           "index_select");
  const Tensor gidx = tensor<int64_t>({0, 3, 1, 1, 2, 0}).view({3, 2});
  expect_same(x.gather(1, gidx), gather(x, 1, gidx), "gather");
  expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return v[0].gather(1, gidx); }, {x}, "gather");
}

TEST(TensorMethods, InPlaceMatchOutOfPlace) {
  const Tensor x = seeded_randn({2, 3}, 10), y = seeded_randn({2, 3}, 11);
  auto fresh = [&] { return x.clone(); };
  {
    Tensor t = fresh();
    const uint32_t v0 = t.version();
    const Tensor& r = t.add_(y, 0.5);
    EXPECT_TRUE(r.is_same(t));
    EXPECT_GT(t.version(), v0);
    expect_same(t, add(x, y, 0.5), "add_");
  }
  {
    Tensor t = fresh();
    t.add_(0.25).mul_(2.0);  // chains like libtorch's
    expect_same(t, (x + 0.25) * 2.0, "add_ scalar then mul_ scalar");
  }
  {
    Tensor t = fresh();
    t.sub_(y, 2.0);
    expect_same(t, add(x, y, -2.0), "sub_");
    Tensor u = fresh();
    u.sub_(1.5);
    expect_same(u, x - 1.5, "sub_ scalar");
  }
  {
    Tensor t = fresh();
    t.mul_(y);
    expect_same(t, x * y, "mul_");
    Tensor u = fresh();
    u.div_(4.0);
    expect_same(u, x / 4.0, "div_ scalar");
    Tensor w = fresh();
    w.div_(y);
    expect_same(w, x / y, "div_");
  }
  {
    Tensor t = fresh();
    t.clamp_(-0.3, 0.4);
    expect_same(t, clamp(x, -0.3, 0.4), "clamp_");
    Tensor u = fresh();
    u.clamp_(std::nullopt, 0.1);
    expect_same(u, clamp(x, std::nullopt, 0.1), "clamp_ max only");
  }
  {
    Tensor t = fresh();
    t.fill_(3.0);
    EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 3.0));
    t.zero_();
    EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 0.0));
    t.copy_(y);
    expect_same(t, y, "copy_");
  }
  // Broadcast operands must fit the destination's shape.
  Tensor t = fresh();
  t.mul_(tensor<double>({1.0, 2.0, 3.0}));
  expect_same(t, x * tensor<double>({1.0, 2.0, 3.0}), "mul_ broadcast");
  expect_error([&] { t.mul_(zeros({3, 3}, {.dtype = DType::F64})); }, "mul_");
}

TEST(TensorMethods, InPlaceOnLeafThatRequiresGradIsRefused) {
  Tensor w = seeded_randn({3}, 12);
  w.requires_grad_();
  expect_error([&] { w.add_(1.0); }, "add_: in-place update of a leaf tensor that requires grad");
  expect_error([&] { w.clamp_(0.0); }, "clamp_: in-place update of a leaf tensor that requires grad");
  expect_error([&] { w.zero_(); }, "fill_: in-place update of a leaf tensor that requires grad");
  NoGradGuard ng;
  w.mul_(2.0);  // allowed outside grad mode, as in an optimizer step
}

// A tensor an op saved for its backward, changed in place afterwards, must make that backward
// throw instead of computing a wrong gradient (PyTorch's version counter check).
TEST(TensorMethods, VersionCheckRefusesBackwardThroughModifiedSavedTensor) {
  Tensor x = seeded_randn({4}, 13);
  x.requires_grad_();
  Tensor c = seeded_randn({4}, 14);  // does not require grad, so in-place updates on it are allowed
  Tensor y = x.mul(c).sum();         // mul saves c for x's gradient
  const uint32_t v = c.version();
  c.mul_(2.0);
  EXPECT_EQ(c.version(), v + 1);
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_NE(msg.find("modified by an in-place operation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gradient of mul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version " + std::to_string(v) + " when saved"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version " + std::to_string(v + 1) + " now"), std::string::npos) << msg;
}

TEST(TensorMethods, VersionCheckSeesChangesThroughViews) {
  Tensor x = seeded_randn({2, 3}, 15);
  x.requires_grad_();
  Tensor c = seeded_randn({2, 3}, 16);
  Tensor y = x.mul(c).sum();
  c.select(0, 1).fill_(0.0);  // a view shares its base's version counter
  expect_error([&] { y.backward(); }, "modified by an in-place operation");
}

TEST(TensorMethods, VersionCheckSeesChangesToSavedOutputs) {
  Tensor x = seeded_randn({5}, 17);
  x.requires_grad_();
  Tensor e = x.exp();  // exp's backward reads its output
  Tensor loss = e.sum();
  {
    NoGradGuard ng;
    e.mul_(3.0);
  }
  expect_error([&] { loss.backward(); }, "exp");
}

TEST(TensorMethods, VersionCheckSeesChangesToSavedIndices) {
  Tensor x = seeded_randn({3, 4}, 18);
  x.requires_grad_();
  Tensor idx = tensor<int64_t>({0, 2});
  Tensor y = x.index_select(0, idx).sum();
  idx.fill_(1.0);
  expect_error([&] { y.backward(); }, "index_select");
}

TEST(TensorMethods, VersionCheckAllowsChangesThatBackwardDoesNotRead) {
  // add's backward reads neither input; updating one after the forward is fine.
  Tensor x = seeded_randn({3}, 19);
  x.requires_grad_();
  Tensor c = seeded_randn({3}, 20);
  Tensor y = x.add(c).sum();
  c.add_(1.0);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>(3, 1.0));
  // An in-place change after backward (an optimizer step) never trips the check.
  Tensor w = seeded_randn({3}, 21);
  w.requires_grad_();
  Tensor z = w.mul(w).sum();
  z.backward();
  NoGradGuard ng;
  w.sub_(w.grad(), 0.1);
}

TEST(TensorMethods, VersionCheckCoversCustomFunctions) {
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
  Tensor x = seeded_randn({3}, 22);
  x.requires_grad_();
  Tensor y = Cube::apply(x).sum();
  {
    NoGradGuard ng;
    x.add_(1.0);
  }
  expect_error([&] { y.backward(); }, "modified by an in-place operation");
}
