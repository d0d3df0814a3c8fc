// Optimizer state in flat buffers: every parameter's state of one kind is a view into one
// buffer per (dtype, device); the results and the state dicts stay as before (PyTorch's names).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/optim.h>
#include <brisk/kernels/threads.h>

using namespace brisk;

namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Tensor leaf(const std::vector<double>& v, DType dt = DType::F64) {
  Tensor t = kernels::cast(from_vector<double>(v, {static_cast<int64_t>(v.size())}), dt);
  t.requires_grad_();
  return t;
}

void set_grads(const std::vector<Tensor>& ps, double scale) {
  for (size_t k = 0; k < ps.size(); ++k) {
    std::vector<double> g(static_cast<size_t>(ps[k].numel()));
    for (size_t i = 0; i < g.size(); ++i) g[i] = scale * (static_cast<double>(i) - 1.5 + 0.25 * static_cast<double>(k));
    ps[k].set_grad(kernels::cast(from_vector<double>(g, ps[k].sizes()), ps[k].dtype()));
  }
}

}  // namespace

TEST(FlatState, EachKindIsOneBufferPerDtypeWithAlignedSlots) {
  Tensor a = leaf({1, 2, 3}, DType::F32), b = leaf({4, 5, 6, 7, 8}, DType::F32), c = leaf({1, 2});
  optim::Adam opt({a, b, c}, {.lr = 0.01});
  set_grads({a, b, c}, 1.0);
  opt.step();
  optim::StateDict sd = opt.state_dict();
  const Tensor* ma = sd.tensor("state.0.exp_avg");
  const Tensor* mb = sd.tensor("state.1.exp_avg");
  const Tensor* mc = sd.tensor("state.2.exp_avg");
  const Tensor* va = sd.tensor("state.0.exp_avg_sq");
  ASSERT_TRUE(ma && mb && mc && va);
  EXPECT_EQ(ma->sizes(), a.sizes());
  // a and b (f32) share one exp_avg buffer, b's slot starting at the next 16-byte boundary.
  EXPECT_EQ(ma->storage().get(), mb->storage().get());
  EXPECT_EQ(static_cast<const char*>(mb->data_ptr()) - static_cast<const char*>(ma->data_ptr()), 16);
  // c (f64) has its own; exp_avg_sq is another buffer.
  EXPECT_NE(ma->storage().get(), mc->storage().get());
  EXPECT_NE(ma->storage().get(), va->storage().get());
  EXPECT_EQ(sd.tensor("state.0.max_exp_avg_sq"), nullptr);  // no amsgrad: no such state
}

TEST(FlatState, StateDictListsOnlyParametersThatStepped) {
  Tensor a = leaf({1, 2, 3}), b = leaf({4, 5});
  optim::SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
  set_grads({a}, 1.0);
  opt.step();
  optim::StateDict sd = opt.state_dict();
  EXPECT_NE(sd.tensor("state.0.momentum_buffer"), nullptr);
  EXPECT_EQ(sd.tensor("state.1.momentum_buffer"), nullptr);
  EXPECT_EQ(sd.scalar("state.0.step"), 1);
  EXPECT_EQ(sd.scalar("state.1.step"), 0);
  EXPECT_EQ(sd.scalar("param_groups.0.momentum"), 0.9);
}

// A parameter that misses a step keeps its own step count (its bias correction), as with
// per-parameter state: each step matches an optimizer that holds that parameter alone.
TEST(FlatState, ParametersAtDifferentStepsMatchSeparateOptimizers) {
  Tensor a = leaf({0.5, -1, 2}), b = leaf({1, 2, 3, 4});
  Tensor a1 = leaf({0.5, -1, 2}), b1 = leaf({1, 2, 3, 4});
  optim::AdamW both({a, b}, {.lr = 0.05, .betas = {0.8, 0.95}, .amsgrad = true});
  optim::AdamW only_a({a1}, {.lr = 0.05, .betas = {0.8, 0.95}, .amsgrad = true});
  optim::AdamW only_b({b1}, {.lr = 0.05, .betas = {0.8, 0.95}, .amsgrad = true});
  for (int t = 0; t < 4; ++t) {
    set_grads({a, b}, 1.0 + t);
    set_grads({a1, b1}, 1.0 + t);
    if (t == 1) {
      b.set_grad(Tensor());
      b1.set_grad(Tensor());
    }
    both.step();
    only_a.step();
    if (t != 1) only_b.step();
  }
  EXPECT_EQ(a.to_vector<double>(), a1.to_vector<double>());
  EXPECT_EQ(b.to_vector<double>(), b1.to_vector<double>());
  EXPECT_EQ(both.state_dict().scalar("state.1.step"), 3);
}

TEST(FlatState, MovingParametersAfterAStepKeepsTheState) {
  Tensor a = leaf({0.5, -1, 2}), ref = leaf({0.5, -1, 2});
  optim::Adam moved({a}, {.lr = 0.1});
  optim::Adam kept({ref}, {.lr = 0.1});
  set_grads({a, ref}, 1.0);
  moved.step();
  kept.step();
  {
    NoGradGuard ng;
    Tensor f32 = kernels::cast(a, DType::F32);
    a.set_data(f32);
  }
  ASSERT_EQ(a.dtype(), DType::F32);
  set_grads({a, ref}, 2.0);
  moved.step();
  kept.step();
  EXPECT_EQ(moved.state_dict().tensor("state.0.exp_avg")->dtype(), DType::F32);
  const std::vector<double> got = a.to_vector<double>(), want = ref.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

// The state dict's tensors are views of the optimizer's own buffers: loading it back into the
// same optimizer keeps the state (it is not cleared before it is read).
TEST(FlatState, LoadingItsOwnStateDictKeepsTheState) {
  Tensor a = leaf({0.5, -1, 2}), b = leaf({0.5, -1, 2});
  optim::Adam self({a}, {.lr = 0.1, .amsgrad = true});
  optim::Adam ref({b}, {.lr = 0.1, .amsgrad = true});
  for (int t = 0; t < 3; ++t) {
    set_grads({a}, 1.0 + t);
    set_grads({b}, 1.0 + t);
    self.step();
    ref.step();
    self.load_state_dict(self.state_dict());
  }
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  EXPECT_EQ(self.state_dict().tensor("state.0.exp_avg")->to_vector<double>(),
            ref.state_dict().tensor("state.0.exp_avg")->to_vector<double>());
}

TEST(FlatState, LoadingAnUnknownStateKindIsAnErrorThatChangesNothing) {
  Tensor a = leaf({0.5, -1, 2});
  optim::Adam opt({a}, {.lr = 0.1});
  set_grads({a}, 1.0);
  opt.step();
  optim::StateDict sd = opt.state_dict();
  const std::vector<double> m = sd.tensor("state.0.exp_avg")->to_vector<double>();
  optim::StateDict bad = sd;
  bad.tensors.emplace_back("state.0.momentum_buffer", zeros({3}, {.dtype = DType::F64}));
  bad.scalars["param_groups.0.lr"] = 0.5;
  const std::string msg = message_of([&] { opt.load_state_dict(bad); });
  EXPECT_NE(msg.find("Adam::load_state_dict: unexpected tensor 'state.0.momentum_buffer'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("exp_avg, exp_avg_sq, max_exp_avg_sq"), std::string::npos) << msg;
  EXPECT_EQ(opt.lr(), 0.1);
  EXPECT_EQ(opt.state_dict().tensor("state.0.exp_avg")->to_vector<double>(), m);
  optim::StateDict past = sd;
  past.tensors.emplace_back("state.7.exp_avg", zeros({3}, {.dtype = DType::F64}));
  EXPECT_NE(message_of([&] { opt.load_state_dict(past); }).find("'state.7.exp_avg'"), std::string::npos);
}

TEST(AdamOptions, BetasPairAndTheOlderBeta1Beta2Agree) {
  Tensor a = leaf({0.5, -1, 2}), b = leaf({0.5, -1, 2});
  optim::Adam pair({a}, {.lr = 0.01, .betas = {0.8, 0.99}});
  optim::Adam old({b}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99});
  EXPECT_EQ(pair.hyper("beta1"), 0.8);
  EXPECT_EQ(pair.hyper("beta2"), 0.99);
  for (int t = 0; t < 3; ++t) {
    set_grads({a}, 1.0 + t);
    set_grads({b}, 1.0 + t);
    pair.step();
    old.step();
  }
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  EXPECT_NE(message_of([&] {
              optim::AdamW({a}, {.betas = {0.8, 0.99}, .beta1 = 0.7});
            }).find("contradicts"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              optim::Adam({a}, {.betas = {0.9, 1.5}});
            }).find("beta parameter at index 1: 1.5"),
            std::string::npos);
}

TEST(SGDOptions, TheLearningRateIsRequired) {
  Tensor a = leaf({0.5, -1, 2});
  const std::string msg = message_of([&] { optim::SGD({a}, {.momentum = 0.9}); });
  EXPECT_NE(msg.find("SGD: the learning rate is required"), std::string::npos) << msg;
  EXPECT_NE(message_of([&] { optim::SGD({{.params = {a}, .options = {}}}); }).find("learning rate is required"),
            std::string::npos);
  // A bad parameter list is still reported first.
  EXPECT_NE(message_of([&] { optim::SGD({}, {}); }).find("empty"), std::string::npos);
}

// The flat state changes where the state lives, not the arithmetic: an AdamW step gives the
// same bits as the fused kernel run on separately allocated state tensors (the layout before),
// for large tensors split over threads, on 1 and 2 threads.
TEST(FlatState, StepsAreBitIdenticalToSeparateStateTensorsOnAnyThreadCount) {
  const int saved = get_num_threads();
  for (DType dt : {DType::F32, DType::BF16}) {
    std::vector<std::vector<float>> first_run;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      manual_seed(7);
      std::vector<Tensor> ps, ref, gs;
      for (int64_t n : {70001, 3, 40000}) {
        Tensor p = kernels::cast(randn({n}), dt);
        ps.push_back(leaf(p.to_vector<double>(), dt));
        ref.push_back(kernels::cast(p, dt));
        gs.push_back(kernels::cast(randn({n}), dt));
      }
      optim::AdamW opt(ps, {.lr = 0.01, .betas = {0.8, 0.95}, .weight_decay = 0.1, .amsgrad = true});
      std::vector<Tensor> m, v, vmax;
      for (const Tensor& r : ref)
        for (auto* list : {&m, &v, &vmax}) list->push_back(zeros(r.sizes(), {.dtype = dt}));
      for (int64_t step = 1; step <= 3; ++step) {
        for (size_t i = 0; i < ps.size(); ++i) ps[i].set_grad(gs[i]);
        opt.step();
        kernels::adam_step(ref, gs, m, v, vmax, {0.01, 0.8, 0.95, 1e-8, 0.1, true, true, false, step});
      }
      std::vector<std::vector<float>> got;
      for (size_t i = 0; i < ps.size(); ++i) {
        EXPECT_EQ(ps[i].to_vector<float>(), ref[i].to_vector<float>()) << dtype_name(dt) << " tensor " << i;
        got.push_back(ps[i].to_vector<float>());
      }
      if (threads == 1)
        first_run = got;
      else
        EXPECT_EQ(got, first_run) << dtype_name(dt) << ": 2 threads differ from 1";
    }
  }
  set_num_threads(saved);
}
