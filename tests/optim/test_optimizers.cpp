// Optimizers against PyTorch's published update rules, written out here as scalar loops in
// double precision (torch.optim.SGD / Adam / AdamW docs, "Algorithm" sections).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <cmath>

using namespace brisk;

namespace {

// Three steps with fixed gradients g_t = grads[t] (same for every element index i: g * (i+1)).
const std::vector<double> kInit = {0.5, -1.0, 2.0};
const std::vector<double> kGradScale = {1.0, -0.5, 0.25};

double grad_at(int t, size_t i) {
  return kGradScale[static_cast<size_t>(t)] * static_cast<double>(i + 1) + 0.1 * kInit[i];
}

template <class Opt>
std::vector<double> run(Opt& opt, Tensor& p, int steps) {
  for (int t = 0; t < steps; ++t) {
    std::vector<double> g(kInit.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = grad_at(t, i);
    p.set_grad(from_vector<double>(g, {3}));
    opt.step();
  }
  return p.to_vector<double>();
}

Tensor param() {
  Tensor p = from_vector<double>(kInit, {3});
  p.requires_grad_();
  return p;
}

// torch.optim.SGD algorithm.
std::vector<double> sgd_ref(double lr, double mom, double damp, double wd, bool nesterov, bool maximize, int steps) {
  std::vector<double> p = kInit, b(3, 0.0);
  for (int t = 0; t < steps; ++t)
    for (size_t i = 0; i < 3; ++i) {
      double g = grad_at(t, i);
      if (maximize) g = -g;  // PyTorch negates before weight decay
      if (wd != 0) g += wd * p[i];
      if (mom != 0) {
        b[i] = t == 0 ? g : mom * b[i] + (1 - damp) * g;
        g = nesterov ? g + mom * b[i] : b[i];
      }
      p[i] -= lr * g;
    }
  return p;
}

// torch.optim.Adam / AdamW algorithm.
std::vector<double> adam_ref(double lr, double b1, double b2, double eps, double wd, bool decoupled, bool amsgrad,
                             int steps) {
  std::vector<double> p = kInit, m(3, 0), v(3, 0), vmax(3, 0);
  for (int t = 1; t <= steps; ++t)
    for (size_t i = 0; i < 3; ++i) {
      double g = grad_at(t - 1, i);
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double mhat = m[i] / (1 - std::pow(b1, t));
      double vv = v[i];
      if (amsgrad) vv = vmax[i] = std::max(vmax[i], v[i]);
      double vhat = vv / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  return p;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << what << " element " << i;
}

}  // namespace

TEST(SGD, PlainStepIsLrTimesGradient) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1});
  expect_close(run(opt, p, 3), sgd_ref(0.1, 0, 0, 0, false, false, 3), "sgd");
  // Hand check of the first step for element 0: 0.5 - 0.1 * (1*1 + 0.05) = 0.395.
  Tensor q = param();
  optim::SGD one({q}, {.lr = 0.1});
  EXPECT_NEAR(run(one, q, 1)[0], 0.395, 1e-15);
}

TEST(SGD, MomentumBufferStartsAsTheFirstGradient) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.05, .momentum = 0.9, .dampening = 0.1});
  expect_close(run(opt, p, 3), sgd_ref(0.05, 0.9, 0.1, 0, false, false, 3), "momentum+dampening");
}

TEST(SGD, NesterovAndWeightDecay) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  expect_close(run(opt, p, 3), sgd_ref(0.05, 0.9, 0, 0.01, true, false, 3), "nesterov+wd");
}

TEST(SGD, MaximizeAscends) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1, .weight_decay = 0.1, .maximize = true});
  expect_close(run(opt, p, 2), sgd_ref(0.1, 0, 0, 0.1, false, true, 2), "maximize");
}

TEST(SGD, ParametersWithoutGradientsAreLeftAlone) {
  Tensor p = param(), q = param();
  optim::SGD opt({p, q}, {.lr = 0.1, .momentum = 0.9});
  p.set_grad(ones({3}, {.dtype = DType::F64}));
  opt.step();
  EXPECT_EQ(q.to_vector<double>(), kInit);
  EXPECT_NE(p.to_vector<double>(), kInit);
}

TEST(Adam, MatchesTheReferenceAlgorithm) {
  Tensor p = param();
  optim::Adam opt({p}, {.lr = 0.01});
  expect_close(run(opt, p, 3), adam_ref(0.01, 0.9, 0.999, 1e-8, 0, false, false, 3), "adam");
  // First step of Adam moves each element by ~lr against the gradient's sign.
  Tensor q = param();
  optim::Adam one({q}, {.lr = 0.01});
  EXPECT_NEAR(run(one, q, 1)[0], 0.5 - 0.01, 1e-9);
}

TEST(Adam, L2WeightDecayAddsToTheGradient) {
  Tensor p = param();
  optim::Adam opt({p}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.1});
  expect_close(run(opt, p, 3), adam_ref(0.01, 0.8, 0.99, 1e-8, 0.1, false, false, 3), "adam wd");
}

TEST(AdamW, DecoupledWeightDecayShrinksTheParameter) {
  Tensor p = param();
  optim::AdamW opt({p}, {.lr = 0.01, .weight_decay = 0.1});
  expect_close(run(opt, p, 3), adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, true, false, 3), "adamw");
  EXPECT_STREQ(opt.name(), "AdamW");
}

TEST(AdamW, CapturableChangesNothingOnTheCpu) {
  Tensor p = param(), q = param();
  optim::AdamW plain({p}, {.lr = 0.01, .weight_decay = 0.1});
  optim::AdamW capturable({q}, {.lr = 0.01, .weight_decay = 0.1, .capturable = true});
  const std::vector<double> a = run(plain, p, 3), b = run(capturable, q, 3);
  EXPECT_EQ(a, b);
  EXPECT_EQ(capturable.state_dict().scalar("state.0.step"), 3.0);
}

TEST(ClipGradNorm, TheTensorVariantClipsAlikeAndReturnsTheNormUnread) {
  Tensor p = param(), q = param();
  p.set_grad(from_vector<double>({3, 4, 0}, {3}));
  q.set_grad(from_vector<double>({3, 4, 0}, {3}));
  const double n = optim::clip_grad_norm_({p}, 1.0);
  const Tensor t = optim::clip_grad_norm_tensor_({q}, 1.0);
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.dtype(), DType::F64);
  EXPECT_EQ(t.item<double>(), n);
  EXPECT_DOUBLE_EQ(n, 5.0);
  EXPECT_EQ(p.grad().to_vector<double>(), q.grad().to_vector<double>());
  EXPECT_EQ(optim::clip_grad_norm_tensor_({param()}, 1.0).item<double>(), 0.0) << "no gradients: zero";
}

TEST(AdamW, AmsgradUsesTheRunningMaxOfTheSecondMoment) {
  Tensor p = param();
  optim::AdamW opt({p}, {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
  // Gradients shrink after step 1, so the max matters.
  expect_close(run(opt, p, 3), adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, true, true, 3), "amsgrad");
}

TEST(Optimizer, ParamGroupsKeepTheirOwnHyperParameters) {
  Tensor a = param(), b = param();
  optim::SGD opt({{.params = {a}, .options = {.lr = 0.1}}, {.params = {b}, .options = {.lr = 0.0}}});
  run(opt, a, 1);
  EXPECT_EQ(b.to_vector<double>(), kInit);  // b had lr 0 (and only a had a gradient set last)
  EXPECT_DOUBLE_EQ(opt.lr(0), 0.1);
  EXPECT_DOUBLE_EQ(opt.lr(1), 0.0);
}

TEST(Optimizer, StateDictRoundTripContinuesIdentically) {
  Tensor p = param();
  optim::Adam opt({p}, {.lr = 0.01, .amsgrad = true});
  run(opt, p, 2);
  optim::StateDict sd = opt.state_dict();
  Tensor q = from_vector<double>(p.to_vector<double>(), {3});
  q.requires_grad_();
  optim::Adam resumed({q}, {.lr = 0.5});
  resumed.load_state_dict(sd);
  EXPECT_DOUBLE_EQ(resumed.lr(), 0.01);
  for (int t = 2; t < 3; ++t) {
    std::vector<double> g(3);
    for (size_t i = 0; i < 3; ++i) g[i] = grad_at(t, i);
    p.set_grad(from_vector<double>(g, {3}));
    q.set_grad(from_vector<double>(g, {3}));
    opt.step();
    resumed.step();
  }
  EXPECT_EQ(p.to_vector<double>(), q.to_vector<double>());
}

TEST(Optimizer, StepGateTurnsStepAndZeroGradIntoNoOps) {
  Tensor p = param();
  optim::SGD opt({p}, {.lr = 0.1});
  bool open = false;
  opt.set_step_gate([&] { return open; });
  p.set_grad(ones({3}, {.dtype = DType::F64}));
  opt.step();
  opt.zero_grad();
  EXPECT_EQ(p.to_vector<double>(), kInit);
  EXPECT_TRUE(p.grad().defined());
  EXPECT_EQ(opt.steps_taken(), 0);
  open = true;
  opt.step();
  EXPECT_EQ(opt.steps_taken(), 1);
}

TEST(Optimizer, OptionValidationNamesTheBadValue) {
  Tensor p = param();
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { optim::SGD({p}, {.lr = -1}); }).find("Invalid learning rate: -1"), std::string::npos);
  EXPECT_NE(message([&] { optim::SGD({p}, {.lr = 0.1, .nesterov = true}); }).find("Nesterov"), std::string::npos);
  EXPECT_NE(message([&] { optim::Adam({p}, {.beta1 = 1.0}); }).find("beta parameter at index 0: 1"), std::string::npos);
  EXPECT_NE(message([&] { optim::AdamW({p}, {.eps = -1}); }).find("epsilon"), std::string::npos);
  EXPECT_NE(message([&] { optim::SGD({}, {}); }).find("empty"), std::string::npos);
  EXPECT_NE(message([&] { optim::SGD({p, p}, {}); }).find("more than once"), std::string::npos);
}

TEST(Optimizer, StateIsCountedAsOptimizerMemory) {
  Tensor p = zeros({1000});
  p.requires_grad_();
  int64_t before = memory_stats().current[static_cast<int>(MemoryCategory::OptimizerState)];
  optim::Adam opt({p});
  p.set_grad(ones({1000}));
  opt.step();
  EXPECT_EQ(memory_stats().current[static_cast<int>(MemoryCategory::OptimizerState)] - before, 2 * 1000 * 4);
}

// The Accelerator's zero1/zero2 make an optimizer step a flat shard instead of the parameters:
// the state is allocated for the shard only, hyper-parameters are kept, and a replacement after
// the first step (state exists) or with a bad list is refused, leaving the optimizer as it was.
TEST(Optimizer, ReplaceParamsStepsTheNewTensorsOnly) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor a = zeros({1000}), b = zeros({10});
  a.requires_grad_();
  b.requires_grad_();
  optim::AdamW opt({a}, {.lr = 0.5, .weight_decay = 0.0});
  EXPECT_NE(message([&] { opt.replace_params({}); }).find("0 parameter lists for 1 groups"), std::string::npos);
  EXPECT_NE(message([&] { opt.replace_params({{}}); }).find("empty"), std::string::npos);
  EXPECT_TRUE(opt.params(0)[0].is_same(a));
  opt.replace_params({{b}});
  ASSERT_EQ(opt.params(0).size(), 1u);
  EXPECT_TRUE(opt.params(0)[0].is_same(b));
  EXPECT_EQ(opt.lr(), 0.5);
  int64_t before = memory_stats().current[static_cast<int>(MemoryCategory::OptimizerState)];
  b.set_grad(ones({10}));
  a.set_grad(ones({1000}));
  opt.step();
  EXPECT_EQ(memory_stats().current[static_cast<int>(MemoryCategory::OptimizerState)] - before, 2 * 10 * 4);
  EXPECT_EQ(a.to_vector<float>()[0], 0.0f);           // no longer the optimizer's
  EXPECT_NEAR(b.to_vector<float>()[0], -0.5f, 1e-4);  // one Adam step of lr 0.5
  EXPECT_NE(message([&] { opt.replace_params({{a}}); }).find("already has state"), std::string::npos);
}

TEST(Optimizer, ParametersOfSeveralDtypesShareAGroup) {
  // One fused call per dtype: an f32 and a bf16 parameter step as they would alone.
  Tensor a = from_vector<float>({0.5f, -1.0f}, {2}),
         b = kernels::cast(from_vector<float>({2.0f, 4.0f}, {2}), DType::BF16);
  a.requires_grad_();
  b.requires_grad_();
  optim::SGD opt({a, b}, {.lr = 0.5, .momentum = 0.5});
  for (int t = 0; t < 2; ++t) {
    a.set_grad(from_vector<float>({1.0f, 2.0f}, {2}));
    b.set_grad(kernels::cast(from_vector<float>({1.0f, -2.0f}, {2}), DType::BF16));
    opt.step();
  }
  // buf = g, then 0.5 g + g = 1.5 g: p -= 0.5 * (g + 1.5 g) = 1.25 g.
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0.5f - 1.25f, -1.0f - 2.5f}));
  EXPECT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{2.0f - 1.25f, 4.0f + 2.5f}));
}

// --- the f32 / f16 / bf16 update paths --------------------------------------------------------------
// PyTorch keeps an optimizer's state in the parameter's dtype: each step reads p, g and the
// state from that dtype, updates, and stores them back rounded to it. The reference below does
// exactly that, in double between the roundings; brisk computes in float between them, so the
// two agree to a few units in the last place of the dtype (the tolerances below), which is far
// tighter than any mistake in an update rule, a bias correction or a state that is not kept.

namespace {

const std::vector<double> kInit8 = {0.5, -1.0, 2.0, 1e-3, -3.5, 100.0, 0.0625, -7e-5};
double grad8(int t, size_t i) {
  const double s[] = {1.0, -0.5, 0.25, 2.0, -1.5, 0.75};
  return s[t % 6] * (static_cast<double>(i % 3) + 0.5) + 0.1 * kInit8[i];
}

// x as dtype dt stores it (through float, as brisk's kernels round their float results).
double round_to(double x, DType dt) {
  switch (dt) {
    case DType::F32:
      return static_cast<float>(x);
    case DType::F16:
      return static_cast<float>(Half(static_cast<float>(x)));
    case DType::BF16:
      return static_cast<float>(BFloat16(static_cast<float>(x)));
    default:
      return x;
  }
}

// rtol: a few units in the last place of the dtype. atol: f32 computes with float
// hyper-parameters too (1 - 0.999f is 1.3e-5 away from 0.001, as in PyTorch's fused kernels),
// so an update of size lr may be off by ~1e-5 lr per step: 6 steps of lr 0.01 stay below 2e-6.
struct DtypeCase {
  DType dt;
  double rtol, atol;
};
const std::vector<DtypeCase> kDtypeCases = {
    {DType::F64, 1e-12, 1e-15}, {DType::F32, 2e-6, 2e-6}, {DType::F16, 3e-3, 1e-5}, {DType::BF16, 2.4e-2, 1e-4}};

Tensor param_of(DType dt) {
  Tensor p = kernels::cast(from_vector<double>(kInit8, {8}), dt);
  p.requires_grad_();
  return p;
}

template <class Opt>
std::vector<double> run_dtype(Opt& opt, Tensor& p, int steps) {
  for (int t = 0; t < steps; ++t) {
    std::vector<double> g(kInit8.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = grad8(t, i);
    p.set_grad(kernels::cast(from_vector<double>(g, {8}), p.dtype()));
    opt.step();
  }
  EXPECT_EQ(p.dtype(), p.grad().dtype());
  return p.to_vector<double>();
}

std::vector<double> sgd_stored_ref(DType dt, double lr, double mom, double damp, double wd, bool nesterov, int steps) {
  std::vector<double> p(8), b(8, 0.0);
  for (size_t i = 0; i < 8; ++i) p[i] = round_to(kInit8[i], dt);
  for (int t = 0; t < steps; ++t)
    for (size_t i = 0; i < 8; ++i) {
      double g = round_to(grad8(t, i), dt);
      if (wd != 0) g += wd * p[i];
      if (mom != 0) {
        b[i] = round_to(t == 0 ? g : mom * b[i] + (1 - damp) * g, dt);
        g = nesterov ? g + mom * b[i] : b[i];
      }
      p[i] = round_to(p[i] - lr * g, dt);
    }
  return p;
}

std::vector<double> adam_stored_ref(DType dt, double lr, double b1, double b2, double eps, double wd, bool decoupled,
                                    bool amsgrad, int steps) {
  std::vector<double> p(8), m(8, 0), v(8, 0), vmax(8, 0);
  for (size_t i = 0; i < 8; ++i) p[i] = round_to(kInit8[i], dt);
  for (int t = 1; t <= steps; ++t)
    for (size_t i = 0; i < 8; ++i) {
      double g = round_to(grad8(t - 1, i), dt), q = p[i];
      if (decoupled)
        q *= 1 - lr * wd;
      else
        g += wd * q;
      m[i] = round_to(b1 * m[i] + (1 - b1) * g, dt);
      v[i] = round_to(b2 * v[i] + (1 - b2) * g * g, dt);
      double vv = v[i];
      if (amsgrad) vv = vmax[i] = round_to(std::max(vmax[i], v[i]), dt);
      const double mhat = m[i] / (1 - std::pow(b1, t)), vhat = vv / (1 - std::pow(b2, t));
      p[i] = round_to(q - lr * mhat / (std::sqrt(vhat) + eps), dt);
    }
  return p;
}

void expect_close_in(const DtypeCase& c, const std::vector<double>& got, const std::vector<double>& want,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(std::fabs(got[i] - want[i]), c.atol + c.rtol * std::fabs(want[i]))
        << what << " " << dtype_name(c.dt) << " element " << i << ": " << got[i] << " vs reference " << want[i];
}

}  // namespace

TEST(SGD, EveryFloatDtypeFollowsTheReferenceWithStateInThatDtype) {
  for (const DtypeCase& c : kDtypeCases) {
    Tensor p = param_of(c.dt);
    optim::SGD plain({p}, {.lr = 0.1});
    expect_close_in(c, run_dtype(plain, p, 6), sgd_stored_ref(c.dt, 0.1, 0, 0, 0, false, 6), "sgd");
    Tensor q = param_of(c.dt);
    optim::SGD mom({q}, {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
    expect_close_in(c, run_dtype(mom, q, 6), sgd_stored_ref(c.dt, 0.05, 0.9, 0.1, 0.01, false, 6), "momentum");
    Tensor r = param_of(c.dt);
    optim::SGD nes({r}, {.lr = 0.05, .momentum = 0.9, .nesterov = true});
    expect_close_in(c, run_dtype(nes, r, 6), sgd_stored_ref(c.dt, 0.05, 0.9, 0, 0, true, 6), "nesterov");
  }
}

TEST(Adam, EveryFloatDtypeFollowsTheReferenceWithStateInThatDtype) {
  for (const DtypeCase& c : kDtypeCases) {
    Tensor p = param_of(c.dt);
    optim::Adam adam({p}, {.lr = 0.01});
    expect_close_in(c, run_dtype(adam, p, 6), adam_stored_ref(c.dt, 0.01, 0.9, 0.999, 1e-8, 0, false, false, 6),
                    "adam");
    Tensor q = param_of(c.dt);
    optim::Adam l2({q}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.1});
    expect_close_in(c, run_dtype(l2, q, 6), adam_stored_ref(c.dt, 0.01, 0.8, 0.99, 1e-8, 0.1, false, false, 6),
                    "adam l2");
  }
}

TEST(AdamW, EveryFloatDtypeFollowsTheReferenceWithStateInThatDtype) {
  for (const DtypeCase& c : kDtypeCases) {
    Tensor p = param_of(c.dt);
    optim::AdamW adamw({p}, {.lr = 0.01, .weight_decay = 0.1});
    expect_close_in(c, run_dtype(adamw, p, 6), adam_stored_ref(c.dt, 0.01, 0.9, 0.999, 1e-8, 0.1, true, false, 6),
                    "adamw");
    Tensor q = param_of(c.dt);
    optim::AdamW ams({q}, {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
    expect_close_in(c, run_dtype(ams, q, 6), adam_stored_ref(c.dt, 0.01, 0.9, 0.999, 1e-8, 0.1, true, true, 6),
                    "amsgrad");
  }
}

// Steady state: once a training loop has run a step, its later steps take every tensor from the
// CPU allocator's cache (same shapes every step): no system allocation at all.
TEST(TrainingLoop, StepsAfterTheFirstMakeNoSystemAllocations) {
  if (!cpu_allocator_stats().caching) GTEST_SKIP() << "the CPU allocator's cache is off in this process";
  struct Net : nn::Module {
    nn::Conv2d c1{1, 8, 3, {.padding = 1}};
    nn::Linear f1{int64_t{8} * 7 * 7, 32}, f2{32, 10};
    Net() { register_modules({{"c1", c1}, {"f1", f1}, {"f2", f2}}); }
    Tensor forward(const Tensor& x) override {
      auto h = max_pool2d(relu(c1(x)), 2);
      return f2(gelu(f1(h.flatten(1)), GeluApproximation::Tanh));
    }
  };
  manual_seed(0);
  Net net;
  optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  Generator gen(1);
  const Tensor x = randn({16, 1, 14, 14}, {}, &gen);
  const Tensor y = randint(0, 10, {16}, {.dtype = DType::I64}, &gen);
  auto step = [&] {
    Tensor loss = nn::cross_entropy(net(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  step();
  step();
  const int64_t before = cpu_allocator_stats().system_allocs;
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(cpu_allocator_stats().system_allocs, before);
}
