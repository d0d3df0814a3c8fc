// The Accelerator in one process (a world of one): options and their precedence, prepare,
// accumulation and the step gates, fp16 step skipping, the sharding plan, collectives' shapes,
// trackers. Checkpoints are in test_checkpoint.cpp; multi-process behaviour in accelerator_worker.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <utility>

#include <sys/stat.h>

#include "accelerate/programs/tiny_net.h"
#include "common/errors.h"
#include "common/scratch.h"

using namespace brisk;
using brisk::testing::error_of;
using brisk::testing::tiny_data;
using brisk::testing::TinyNet;

namespace {

std::function<const char*(const char*)> fake_env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::vector<std::vector<int64_t>> plan_of(int64_t n, int64_t batch, bool drop_last = false) {
  return data::make_batches(arange(n).to_vector<int64_t>(), batch, drop_last);
}

}  // namespace

// --- options ----------------------------------------------------------------------------------

TEST(AcceleratorOptions, DefaultsWhenNothingIsSet) {
  AcceleratorSettings s = resolve_accelerator_options({}, fake_env({}));
  EXPECT_EQ(s.mixed_precision, MixedPrecision::No);
  EXPECT_EQ(s.gradient_accumulation_steps, 1);
  EXPECT_FALSE(s.cpu);
  EXPECT_TRUE(s.device_placement);
  EXPECT_FALSE(s.split_batches);
  EXPECT_TRUE(s.even_batches);
  EXPECT_FALSE(s.seed.has_value());
  EXPECT_EQ(s.bucket_cap_mb, 25.0);
  EXPECT_FALSE(s.find_unused_parameters);
  EXPECT_EQ(s.scaler.init_scale, 65536.0);
  EXPECT_EQ(s.scaler.growth_interval, 2000);
  EXPECT_EQ(s.source.at("mixed_precision"), "default");
}

TEST(AcceleratorOptions, EnvironmentOverridesDefaultsAndProgramOverridesEnvironment) {
  auto env = fake_env({{"BRISK_MIXED_PRECISION", "bf16"},
                       {"BRISK_CPU", "1"},
                       {"BRISK_GRADIENT_ACCUMULATION_STEPS", "4"},
                       {"BRISK_BUCKET_CAP_MB", "5"}});
  AcceleratorSettings from_env = resolve_accelerator_options({}, env);
  EXPECT_EQ(from_env.mixed_precision, MixedPrecision::BF16);
  EXPECT_TRUE(from_env.cpu);
  EXPECT_EQ(from_env.gradient_accumulation_steps, 4);
  EXPECT_EQ(from_env.bucket_cap_mb, 5.0);
  EXPECT_EQ(from_env.source.at("mixed_precision"), "env BRISK_MIXED_PRECISION");

  AcceleratorSettings program = resolve_accelerator_options(
      {.mixed_precision = MixedPrecision::No, .gradient_accumulation_steps = 1, .cpu = false}, env);
  EXPECT_EQ(program.mixed_precision, MixedPrecision::No);  // set to the default value, still wins: unset != default
  EXPECT_EQ(program.gradient_accumulation_steps, 1);
  EXPECT_FALSE(program.cpu);
  EXPECT_EQ(program.source.at("cpu"), "program");
  EXPECT_EQ(program.bucket_cap_mb, 5.0);  // not set by the program: the environment's
}

// The program sets an enum (a typo does not compile); the environment's string is parsed once,
// and a bad one is named with where it came from and every valid spelling.
TEST(AcceleratorOptions, BadMixedPrecisionNamesTheValueAndWhereItCameFrom) {
  std::string e = error_of([] { resolve_accelerator_options({}, fake_env({{"BRISK_MIXED_PRECISION", "fp8"}})); });
  EXPECT_NE(e.find("mixed_precision"), std::string::npos) << e;
  EXPECT_NE(e.find("'fp8'"), std::string::npos) << e;
  EXPECT_NE(e.find("no, fp16, bf16"), std::string::npos) << e;
  e = error_of([] { resolve_accelerator_options({}, fake_env({{"BRISK_MIXED_PRECISION", "half"}})); });
  EXPECT_NE(e.find("'half'"), std::string::npos) << e;
  EXPECT_NE(e.find("BRISK_MIXED_PRECISION"), std::string::npos) << e;
  EXPECT_EQ(resolve_accelerator_options({}, fake_env({{"BRISK_MIXED_PRECISION", "fp16"}})).mixed_precision,
            MixedPrecision::FP16);
}

// Sharding (docs/sharding.md): the program's enum wins over BRISK_SHARDING; a bad word names the
// variable and the valid ones; zero3 resolves with its wrap policy.
TEST(AcceleratorOptions, ShardingFromProgramOrEnvironment) {
  EXPECT_EQ(resolve_accelerator_options({}, fake_env({})).sharding, Sharding::None);
  const AcceleratorSettings env = resolve_accelerator_options({}, fake_env({{"BRISK_SHARDING", "zero2"}}));
  EXPECT_EQ(env.sharding, Sharding::Zero2);
  EXPECT_EQ(env.source.at("sharding"), "env BRISK_SHARDING");
  EXPECT_EQ(
      resolve_accelerator_options({.sharding = Sharding::Zero1}, fake_env({{"BRISK_SHARDING", "zero2"}})).sharding,
      Sharding::Zero1);
  std::string e = error_of([] { resolve_accelerator_options({}, fake_env({{"BRISK_SHARDING", "zero4"}})); });
  EXPECT_NE(e.find("BRISK_SHARDING"), std::string::npos) << e;
  EXPECT_NE(e.find("'zero4'"), std::string::npos) << e;
  EXPECT_NE(e.find("none, zero1, zero2, zero3"), std::string::npos) << e;
  const AcceleratorSettings z3 =
      resolve_accelerator_options({.sharding = Sharding::Zero3, .zero3_wrap = {"h0", "h1"}}, fake_env({}));
  EXPECT_EQ(z3.sharding, Sharding::Zero3);
  EXPECT_EQ(z3.zero3_wrap, (std::vector<std::string>{"h0", "h1"}));
  EXPECT_EQ(resolve_accelerator_options({}, fake_env({{"BRISK_SHARDING", "zero3"}})).sharding, Sharding::Zero3);
}

// Under sharding the optimizers' engines average the gradients (docs/sharding.md): a trainable
// parameter that no prepared optimizer holds would silently stay local, so backward refuses it.
TEST(AcceleratorSharding, TrainableParameterOutsideEveryOptimizerIsAnError) {
  Accelerator acc({.sharding = Sharding::Zero2});
  TinyNet net;
  optim::SGD opt(net.f1.parameters(), {.lr = 0.1});
  acc.prepare(net, opt);
  Tensor x = ones({4, 4});
  std::string e = error_of([&] { acc.backward(net(x).sum()); });
  EXPECT_NE(e.find("belongs to no prepared optimizer"), std::string::npos) << e;
  EXPECT_NE(e.find("zero2"), std::string::npos) << e;
}

// zero3 needs the module tree of the optimizer's model: an optimizer prepared before its model is
// refused, saying so; a wrap policy naming a module the model lacks, or nesting units, too.
TEST(AcceleratorSharding, Zero3NeedsTheModelFirstAndAValidWrapPolicy) {
  {
    Accelerator acc({.sharding = Sharding::Zero3});
    TinyNet net;
    optim::SGD opt(net.parameters(), {.lr = 0.1});
    const std::string e = error_of([&] { acc.prepare(opt, net); });
    EXPECT_NE(e.find("prepare the model before"), std::string::npos) << e;
  }
  {
    Accelerator acc({.sharding = Sharding::Zero3, .zero3_wrap = {"f9"}});
    TinyNet net;
    optim::SGD opt(net.parameters(), {.lr = 0.1});
    const std::string e = error_of([&] { acc.prepare(net, opt); });
    EXPECT_NE(e.find("zero3_wrap names the module 'f9'"), std::string::npos) << e;
  }
}

// zero3 in a world of one under each wrap policy (default: f1 and f2; one unit; every module)
// trains to plain data parallelism's parameters; between uses the parameters hold no bytes and
// full_parameters() gathers them for reading.
TEST(AcceleratorSharding, Zero3WrapPoliciesTrainAsUnsharded) {
  auto run = [](Sharding s, std::vector<std::string> wrap) {
    Accelerator acc({.sharding = s, .zero3_wrap = std::move(wrap), .seed = 4});
    TinyNet net;
    optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
    acc.prepare(net, opt);
    Generator g(3);
    for (int i = 0; i < 10; ++i) {
      Tensor x = randn({8, 4}, {}, &g);
      acc.backward(net(x).square().mean());
      opt.step();
      opt.zero_grad();
    }
    if (s == Sharding::Zero3) {
      EXPECT_FALSE(net.f1.weight.storage()->is_allocated());
    }
    auto full = acc.full_parameters(net);
    EXPECT_TRUE(net.f1.weight.storage()->is_allocated());
    return flat_params(net);
  };
  const std::vector<float> ref = run(Sharding::None, {});
  for (const std::vector<std::string>& wrap :
       {std::vector<std::string>{}, std::vector<std::string>{"f2"}, std::vector<std::string>{"*"}}) {
    const std::vector<float> got = run(Sharding::Zero3, wrap);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-7 + 1e-6 * std::fabs(ref[i])) << i;
  }
}

TEST(AcceleratorOptions, OtherBadValuesAreClearErrors) {
  EXPECT_NE(error_of([] {
              resolve_accelerator_options({.gradient_accumulation_steps = 0}, fake_env({}));
            }).find("gradient_accumulation_steps"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              resolve_accelerator_options({}, fake_env({{"BRISK_CPU", "maybe"}}));
            }).find("BRISK_CPU"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              resolve_accelerator_options({}, fake_env({{"BRISK_GRADIENT_ACCUMULATION_STEPS", "two"}}));
            }).find("'two'"),
            std::string::npos);
  EXPECT_NE(error_of([] { resolve_accelerator_options({.total_limit = 0}, fake_env({})); }).find("total_limit"),
            std::string::npos);
  EXPECT_NE(error_of([] { resolve_accelerator_options({.bucket_cap_mb = -1.0}, fake_env({})); }).find("bucket_cap_mb"),
            std::string::npos);
}

TEST(Accelerator, ProcessFactsInAWorldOfOne) {
  Accelerator acc({.cpu = true});
  EXPECT_TRUE(acc.is_main_process());
  EXPECT_TRUE(acc.is_local_main_process());
  EXPECT_EQ(acc.process_index(), 0);
  EXPECT_EQ(acc.local_process_index(), 0);
  EXPECT_EQ(acc.num_processes(), 1);
  EXPECT_TRUE(acc.device().is_cpu());
  acc.wait_for_everyone();
  { auto first = acc.main_process_first(); }
  EXPECT_EQ(acc.split_between_processes(std::vector<int>{1, 2, 3}), (std::vector<int>{1, 2, 3}));
}

TEST(Accelerator, SetSeedSeedsTheDefaultGenerator) {
  Accelerator acc;
  acc.set_seed(123);
  Tensor a = rand({4});
  manual_seed(123);
  Tensor b = rand({4});
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

// --- prepare ---------------------------------------------------------------------------------

TEST(Accelerator, PreparingTheSameObjectTwiceIsAnError) {
  Accelerator acc;
  TinyNet net;
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  data::DataLoader loader(tiny_data(16), {.batch_size = 4});
  optim::StepLR sched(opt, 2);
  acc.prepare(net, opt, loader, sched);
  std::string e = error_of([&] { acc.prepare(net); });
  EXPECT_NE(e.find("already prepared"), std::string::npos) << e;
  EXPECT_NE(e.find("model"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { acc.prepare(opt); }).find("optimizer was already prepared"), std::string::npos);
  EXPECT_NE(error_of([&] { acc.prepare(loader); }).find("data loader was already prepared"), std::string::npos);
  EXPECT_NE(error_of([&] { acc.prepare(sched); }).find("scheduler was already prepared"), std::string::npos);
  // A second Accelerator may prepare fresh objects in any order.
  Accelerator other;
  TinyNet net2;
  optim::Adam opt2(net2.parameters());
  data::DataLoader loader2(tiny_data(8), {.batch_size = 4});
  other.prepare(loader2, opt2, net2);
  EXPECT_EQ(&other.unwrap_model(net2), &net2);
}

TEST(Accelerator, AccumulateSyncsEveryNthStepAndAtTheLastBatch) {
  Accelerator acc({.gradient_accumulation_steps = 2});
  TinyNet net;
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  data::DataLoader loader(tiny_data(20), {.batch_size = 4});  // 5 batches
  acc.prepare(net, opt, loader);
  std::vector<bool> syncs;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (auto& batch : loader) {
      (void)batch;
      auto s = acc.accumulate(net);
      EXPECT_EQ(s.sync(), acc.sync_gradients());
      syncs.push_back(s.sync());
    }
  // The last batch syncs and restarts the count, so the second epoch repeats the first.
  EXPECT_EQ(syncs, (std::vector<bool>{false, true, false, true, true, false, true, false, true, true}));
}

TEST(Accelerator, OptimizerStepAndZeroGradDoNothingOnMicroStepsThatDoNotSync) {
  Accelerator acc({.gradient_accumulation_steps = 2});
  TinyNet net;
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  optim::StepLR sched(opt, 1, 0.5);
  data::DataLoader loader(tiny_data(32), {.batch_size = 4});  // 8 batches: 4 real steps
  acc.prepare(net, opt, loader, sched);
  int64_t micro = 0;
  for (auto& [x, y] : loader) {
    auto s = acc.accumulate(net);
    const std::vector<float> before = brisk::testing::flat_params(net);
    acc.backward(cross_entropy(net(x), y));
    const std::vector<float> grads = brisk::testing::flat_grads(net);
    opt.step();
    sched.step();
    opt.zero_grad();
    ++micro;
    if (!s.sync()) {
      EXPECT_EQ(brisk::testing::flat_params(net), before) << "micro-step " << micro;
      EXPECT_EQ(brisk::testing::flat_grads(net), grads) << "zero_grad must keep the accumulated gradients";
    } else {
      EXPECT_NE(brisk::testing::flat_params(net), before);
      EXPECT_FALSE(net.f1.weight.grad().defined());
    }
  }
  EXPECT_EQ(opt.steps_taken(), 4);
  EXPECT_EQ(sched.last_step(), 4);  // once per real optimizer step
  EXPECT_DOUBLE_EQ(opt.lr(), 0.1 * 0.5 * 0.5 * 0.5 * 0.5);
}

TEST(Accelerator, BackwardDividesByTheAccumulationSteps) {
  auto ds = tiny_data(8);
  manual_seed(3);
  TinyNet ref;
  data::DataLoader plain(ds, {.batch_size = 8});
  for (auto& [x, y] : plain) cross_entropy(ref(x), y).backward();
  const std::vector<float> want = brisk::testing::flat_grads(ref);

  Accelerator acc({.gradient_accumulation_steps = 4});
  manual_seed(3);
  TinyNet net;
  data::DataLoader loader(ds, {.batch_size = 8});
  acc.prepare(net, loader);
  for (auto& [x, y] : loader) acc.backward(cross_entropy(net(x), y));
  const std::vector<float> got = brisk::testing::flat_grads(net);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i] / 4) << i;
}

TEST(Accelerator, Fp16ScalerFindingInfSkipsTheStepAndHalvesTheScale) {
  Accelerator acc({.mixed_precision = MixedPrecision::FP16});
  TinyNet net;
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  optim::StepLR sched(opt, 1, 0.5);
  acc.prepare(net, opt, sched);
  ASSERT_NE(acc.scaler(), nullptr);
  EXPECT_EQ(acc.scaler()->get_scale(), 65536.0);
  auto ds = tiny_data(8);
  Tensor x = ds->data(), y = ds->targets();
  const std::vector<float> before = brisk::testing::flat_params(net);
  {
    Tensor loss;
    {
      auto ac = acc.autocast();
      loss = cross_entropy(net(x), y);
    }
    acc.backward(loss * std::numeric_limits<double>::infinity());
  }
  opt.step();
  sched.step();
  opt.zero_grad();
  EXPECT_TRUE(acc.optimizer_step_was_skipped());
  EXPECT_EQ(brisk::testing::flat_params(net), before);
  EXPECT_EQ(acc.scaler()->get_scale(), 32768.0);
  EXPECT_EQ(opt.steps_taken(), 0);
  EXPECT_EQ(sched.last_step(), 0);
  EXPECT_FALSE(net.f1.weight.grad().defined()) << "zero_grad still runs after a skipped step";
  // A clean step goes through, with gradients unscaled before the update.
  {
    Tensor loss;
    {
      auto ac = acc.autocast();
      loss = cross_entropy(net(x), y);
    }
    acc.backward(loss);
  }
  const double norm = acc.clip_grad_norm_(net, 1e9);
  EXPECT_LT(norm, 100.0) << "gradients must be unscaled before clipping";
  opt.step();
  EXPECT_FALSE(acc.optimizer_step_was_skipped());
  EXPECT_NE(brisk::testing::flat_params(net), before);
  EXPECT_EQ(opt.steps_taken(), 1);
}

TEST(Accelerator, Bf16AutocastRunsTheModelInBf16) {
  Accelerator acc({.mixed_precision = MixedPrecision::BF16});
  TinyNet net;
  acc.prepare(net);
  auto ds = tiny_data(4);
  auto ac = acc.autocast();
  EXPECT_EQ(net(ds->data()).dtype(), DType::BF16);
}

TEST(Accelerator, MixedPrecisionTurnsOnTheOptimizersAutocastCopies) {
  for (MixedPrecision mp : {MixedPrecision::No, MixedPrecision::BF16, MixedPrecision::FP16}) {
    Accelerator acc({.mixed_precision = mp});
    TinyNet net;
    optim::AdamW opt(net.parameters(), {.lr = 1e-2});
    acc.prepare(net, opt);
    const DType want = mp == MixedPrecision::BF16 ? DType::BF16 : mp == MixedPrecision::FP16 ? DType::F16 : DType::F32;
    EXPECT_EQ(opt.autocast_copies(), want) << "the copies autocast reads instead of casting each weight";
    acc.free_memory();
    EXPECT_EQ(opt.autocast_copies(), DType::F32) << "free_memory frees them";
  }
}

TEST(Accelerator, ClipGradNormReturnsTheTotalNorm) {
  Accelerator acc;
  TinyNet net;
  acc.prepare(net);
  auto ds = tiny_data(8);
  acc.backward(cross_entropy(net(ds->data()), ds->targets()));
  double want = 0;
  for (float g : brisk::testing::flat_grads(net)) want += static_cast<double>(g) * g;
  want = std::sqrt(want);
  EXPECT_NEAR(acc.clip_grad_norm_(net, 1e-3), want, 1e-5 * want);
  double after = 0;
  for (float g : brisk::testing::flat_grads(net)) after += static_cast<double>(g) * g;
  EXPECT_NEAR(std::sqrt(after), 1e-3, 1e-5);
  acc.clip_grad_value_(net, 1e-5);
  for (float g : brisk::testing::flat_grads(net)) EXPECT_LE(std::fabs(g), 1e-5f);
}

// --- nan_watch and deterministic -------------------------------------------------------------------

namespace {
// A linear layer plus a parameter `extra` that enters the loss as sqrt(0 * extra): the loss stays
// finite while extra's gradient is 0 * inf = NaN.
struct NanGradNet : nn::Module {
  nn::Linear f{4, 3};
  Tensor extra;
  NanGradNet() {
    register_modules({{"f", f}});
    extra = register_parameter("extra", zeros({2}));
  }
  Tensor forward(const Tensor& x) override { return f(x); }
  Tensor loss(const Tensor& x, bool poison) {
    Tensor l = forward(x).sum();
    return poison ? l + sqrt(extra * 0.0).sum() : l;
  }
};
}  // namespace

TEST(AcceleratorOptions, NanWatchAndDeterministicFromProgramAndEnvironment) {
  AcceleratorSettings d = resolve_accelerator_options({}, fake_env({}));
  EXPECT_FALSE(d.nan_watch);
  EXPECT_FALSE(d.deterministic.has_value());
  AcceleratorSettings e =
      resolve_accelerator_options({}, fake_env({{"BRISK_NAN_WATCH", "TRUE"}, {"BRISK_DETERMINISTIC", "off"}}));
  EXPECT_TRUE(e.nan_watch);
  EXPECT_EQ(e.deterministic, false);
  EXPECT_EQ(e.source.at("nan_watch"), "env BRISK_NAN_WATCH");
  EXPECT_EQ(e.source.at("deterministic"), "env BRISK_DETERMINISTIC");
  AcceleratorSettings p = resolve_accelerator_options(
      {.nan_watch = false, .deterministic = true}, fake_env({{"BRISK_NAN_WATCH", "1"}, {"BRISK_DETERMINISTIC", "0"}}));
  EXPECT_FALSE(p.nan_watch);
  EXPECT_EQ(p.deterministic, true);
  for (const char* var : {"BRISK_NAN_WATCH", "BRISK_DETERMINISTIC", "BRISK_CPU"}) {
    const std::string msg = error_of([&] { resolve_accelerator_options({}, fake_env({{var, "sometimes"}})); });
    EXPECT_NE(msg.find(var), std::string::npos) << msg;
    EXPECT_NE(msg.find("'sometimes'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("yes/no"), std::string::npos) << msg;
  }
  // Every boolean spelling, in any case (BRISK_CPU=TRUE used to be read differently by different parsers).
  for (const char* on : {"TRUE", "True", "1", "yes", "ON"})
    EXPECT_TRUE(resolve_accelerator_options({}, fake_env({{"BRISK_CPU", on}})).cpu) << on;
}

TEST(Accelerator, NanWatchNamesTheFirstParameterWithANonFiniteGradient) {
  Accelerator acc({.nan_watch = true});
  NanGradNet net;
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  acc.prepare(net, opt);
  Generator g(1);
  const Tensor x = randn({5, 4}, {}, &g);
  acc.backward(net.loss(x, false));  // finite: no error
  opt.step();
  opt.zero_grad();
  const std::vector<float> before = brisk::testing::flat_params(net);
  const std::string msg = error_of([&] { acc.backward(net.loss(x, true)); });
  EXPECT_NE(msg.find("gradient of parameter 'extra'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nan_watch"), std::string::npos) << msg;
  EXPECT_EQ(brisk::testing::flat_params(net), before);
  opt.zero_grad();
  // A non-finite loss is named as such.
  const std::string lmsg =
      error_of([&] { acc.backward(net.loss(x, false) * std::numeric_limits<double>::infinity()); });
  EXPECT_NE(lmsg.find("the loss is inf"), std::string::npos) << lmsg;
}

TEST(Accelerator, WithoutNanWatchANanGradientPassesSilently) {
  Accelerator acc;
  NanGradNet net;
  acc.prepare(net);
  Generator g(1);
  EXPECT_NO_THROW(acc.backward(net.loss(randn({5, 4}, {}, &g), true)));
  EXPECT_TRUE(std::isnan(net.extra.grad().to_vector<float>()[0]));
}

TEST(Accelerator, DeterministicOptionSetsTheKernelSwitch) {
  kernels::DeterministicGuard restore(kernels::deterministic());
  {
    Accelerator acc({.deterministic = false});
    EXPECT_FALSE(kernels::deterministic());
    // Without a deterministic algorithm an op may then go ahead.
    EXPECT_NO_THROW(kernels::check_nondeterministic_allowed("conv2d backward (filter)", "no deterministic algorithm"));
  }
  {
    Accelerator acc({.deterministic = true});
    EXPECT_TRUE(kernels::deterministic());
    const std::string msg = error_of([] {
      kernels::check_nondeterministic_allowed("cudnnConvolutionBackwardFilter", "no deterministic algorithm");
    });
    EXPECT_NE(msg.find("cudnnConvolutionBackwardFilter: no deterministic algorithm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("BRISK_DETERMINISTIC=0"), std::string::npos) << msg;
  }
  kernels::set_deterministic(false);
  {
    Accelerator acc;  // unset: the process's setting stays
    EXPECT_FALSE(kernels::deterministic());
  }
  ::setenv("BRISK_DETERMINISTIC", "TRUE", 1);
  {
    Accelerator acc;
    EXPECT_TRUE(kernels::deterministic());
  }
  ::unsetenv("BRISK_DETERMINISTIC");
}

TEST(AcceleratorOptions, ProfileFromProgramAndEnvironment) {
  EXPECT_FALSE(resolve_accelerator_options({}, fake_env({})).profile.has_value());
  for (const auto& [value, want] : std::vector<std::pair<std::string, bool>>{
           {"1", true}, {"off", false}, {"TRUE", true}, {"/tmp/profile.txt", true}}) {
    AcceleratorSettings e = resolve_accelerator_options({}, fake_env({{"BRISK_PROFILE", value}}));
    EXPECT_EQ(e.profile, want) << value;
    EXPECT_EQ(e.source.at("profile"), "env BRISK_PROFILE");
  }
  AcceleratorSettings p = resolve_accelerator_options({.profile = false}, fake_env({{"BRISK_PROFILE", "1"}}));
  EXPECT_EQ(p.profile, false);
  EXPECT_EQ(p.source.at("profile"), "program");
}

TEST(Accelerator, ProfileOptionSwitchesTheProfiler) {
  profiler::enable();  // (already on: the Accelerator leaves the report where it is; none is set here)
  {
    Accelerator acc({.cpu = true, .profile = false});
    EXPECT_FALSE(profiler::enabled());
  }
  {
    Accelerator acc({.cpu = true});  // unset: left as it is
    EXPECT_FALSE(profiler::enabled());
  }
  profiler::disable();
  profiler::reset();
}

// profile = true with no BRISK_PROFILE: the table goes to stderr at exit (a fresh process).
TEST(Accelerator, ProfileOptionPrintsTheTableAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::unsetenv("BRISK_PROFILE");
  EXPECT_EXIT(
      {
        Accelerator acc({.cpu = true, .profile = true});
        nn::Linear net(4, 2);
        optim::SGD opt(net.parameters(), {.lr = 0.1});
        acc.prepare(net, opt);
        acc.backward(mse_loss(net(randn({3, 4})), randn({3, 2})));
        opt.step();
        std::exit(profiler::enabled() ? 0 : 3);
      },
      ::testing::ExitedWithCode(0),
      "(LinearBackward(.|\n)*SGD\\.step|SGD\\.step(.|\n)*LinearBackward)(.|\n)*Self CPU time total: ");
}

// --- sharding plans (pure functions, any world size) --------------------------------------------

TEST(ShardBatchPlan, EvenBatchesCyclesFromTheStart) {
  // As Accelerate (docs/accelerator-options.md "Data sharding"): range(22), batch 3, 2 ranks: rank 1's last batch is
  // [21, 0, 1].
  auto global = plan_of(22, 3);
  auto r0 = accelerate::shard_batch_plan(global, 3, 2, 0, false, true, false);
  auto r1 = accelerate::shard_batch_plan(global, 3, 2, 1, false, true, false);
  ASSERT_EQ(r0.batches.size(), 4u);
  ASSERT_EQ(r1.batches.size(), 4u);
  EXPECT_EQ(r0.batches.back(), (std::vector<int64_t>{18, 19, 20}));
  EXPECT_EQ(r1.batches.back(), (std::vector<int64_t>{21, 0, 1}));
  EXPECT_EQ(r1.batches.front(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(r0.last_round_real, 4);  // 18, 19, 20, 21 are real; 0 and 1 repeat
  EXPECT_EQ(r0.last_round_size, 6);
}

TEST(ShardBatchPlan, RanksTakeEveryNthBatchOfOneGlobalOrder) {
  for (int64_t N : {2, 4}) {
    auto global = plan_of(32 * N, 8);
    std::vector<int64_t> gathered;
    std::vector<accelerate::ShardedPlan> plans;
    for (int64_t r = 0; r < N; ++r) plans.push_back(accelerate::shard_batch_plan(global, 8, N, r, false, true, false));
    for (size_t step = 0; step < plans[0].batches.size(); ++step)
      for (int64_t r = 0; r < N; ++r)
        for (int64_t i : plans[static_cast<size_t>(r)].batches[step]) gathered.push_back(i);
    EXPECT_EQ(gathered, arange(32 * N).to_vector<int64_t>()) << N;
  }
}

TEST(ShardBatchPlan, SplitBatchesCutsEachGlobalBatch) {
  auto global = plan_of(16, 8);
  auto r1 = accelerate::shard_batch_plan(global, 8, 4, 1, true, true, false);
  ASSERT_EQ(r1.batches.size(), 2u);
  EXPECT_EQ(r1.batches[0], (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r1.batches[1], (std::vector<int64_t>{10, 11}));
  // A short last global batch is padded from the first batch, then cut.
  auto short_plan = plan_of(10, 4);  // [0..3] [4..7] [8, 9]
  auto s1 = accelerate::shard_batch_plan(short_plan, 4, 2, 1, true, true, false);
  EXPECT_EQ(s1.batches.back(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s1.last_round_real, 2);
  EXPECT_EQ(s1.last_round_size, 4);
  EXPECT_NE(error_of([&] { accelerate::shard_batch_plan(global, 8, 3, 0, true, true, false); }).find("multiple"),
            std::string::npos);
}

TEST(ShardBatchPlan, DropLastAndUnevenBatches) {
  auto global = plan_of(22, 3, true);  // 7 full batches
  auto r0 = accelerate::shard_batch_plan(global, 3, 2, 0, false, true, true);
  auto r1 = accelerate::shard_batch_plan(global, 3, 2, 1, false, true, true);
  EXPECT_EQ(r0.batches.size(), 3u);  // the incomplete round is dropped
  EXPECT_EQ(r1.batches.size(), 3u);
  auto uneven = plan_of(22, 3);
  EXPECT_EQ(accelerate::shard_batch_plan(uneven, 3, 2, 0, false, false, false).batches.size(), 4u);
  auto u1 = accelerate::shard_batch_plan(uneven, 3, 2, 1, false, false, false);
  ASSERT_EQ(u1.batches.size(), 4u);
  EXPECT_EQ(u1.batches.back(), (std::vector<int64_t>{21}));
}

TEST(ShardBatchPlan, OneProcessKeepsTheLoadersPlan) {
  auto global = plan_of(22, 3);
  EXPECT_EQ(accelerate::shard_batch_plan(global, 3, 1, 0, false, true, false).batches, global);
}

// --- collectives in a world of one --------------------------------------------------------------

TEST(Accelerator, CollectivesInAWorldOfOne) {
  Accelerator acc;
  Tensor t = arange(6).reshape({2, 3});
  EXPECT_EQ(acc.gather(t).sizes(), (Shape{2, 3}));
  EXPECT_EQ(acc.gather(full({}, 2.0)).sizes(), (Shape{1}));
  EXPECT_EQ(acc.reduce(t).to_vector<int64_t>(), t.to_vector<int64_t>());
  for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Product})
    EXPECT_EQ(acc.reduce(t, op).to_vector<int64_t>(), t.to_vector<int64_t>());
  EXPECT_EQ(acc.reduce(full({2}, 1.5), dist::ReduceOp::Mean).to_vector<float>(), (std::vector<float>{1.5f, 1.5f}));
  EXPECT_NE(error_of([&] { acc.reduce(t, dist::ReduceOp::Mean); }).find("mean needs a floating-point tensor"),
            std::string::npos);
  EXPECT_EQ(acc.broadcast(t).to_vector<int64_t>(), t.to_vector<int64_t>());
  EXPECT_EQ(acc.pad_across_processes(t, 1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(acc.split_between_processes(t).sizes(), (Shape{2, 3}));
}

TEST(Accelerator, GatherForMetricsYieldsTheDatasetOnce) {
  for (int64_t size : {22, 5, 8}) {
    Accelerator acc;
    data::DataLoader loader(std::make_shared<data::TensorDataset>(arange(size), arange(size)), {.batch_size = 3});
    acc.prepare(loader);
    int64_t seen = 0;
    for (auto& b : loader) seen += acc.gather_for_metrics(b.data).size(0);
    EXPECT_EQ(seen, size);
  }
}

TEST(Accelerator, SkipFirstBatchesStartsTheNextIterationLater) {
  Accelerator acc;
  data::DataLoader loader(std::make_shared<data::TensorDataset>(arange(10), arange(10)), {.batch_size = 2});
  acc.prepare(loader);
  acc.skip_first_batches(loader, 3);
  std::vector<int64_t> firsts;
  for (auto& b : loader) firsts.push_back(b.data.to_vector<int64_t>()[0]);
  EXPECT_EQ(firsts, (std::vector<int64_t>{6, 8}));
}

// --- trackers ---------------------------------------------------------------------------------------

TEST(Accelerator, LogWritesJsonlAndCsvInTheProjectDir) {
  const std::string dir = brisk::testing::scratch() + "/brisk_acc_log";
  std::filesystem::remove_all(dir);
  Accelerator acc({.project_dir = dir});
  acc.log({{"loss", 0.5}}, 1);
  acc.log({{"loss", 0.25}, {"accuracy", 0.75}}, 2);
  std::ifstream jl(dir + "/metrics.jsonl");
  std::string l1, l2;
  std::getline(jl, l1);
  std::getline(jl, l2);
  EXPECT_EQ(l1, "{\"step\":1,\"loss\":0.5}");
  EXPECT_EQ(l2, "{\"step\":2,\"loss\":0.25,\"accuracy\":0.75}");
  std::ifstream csv(dir + "/metrics.csv");
  std::stringstream text;
  text << csv.rdbuf();
  EXPECT_EQ(text.str(), "step,loss,accuracy\n1,0.5,\n2,0.25,0.75\n");
}

// A log call that brings no new key appends one row to metrics.csv instead of rewriting the file
// (the inode stays); a new key rewrites it atomically with the wider header.
TEST(Accelerator, LogAppendsCsvRowsAndRewritesOnlyForANewKey) {
  const std::string dir = brisk::testing::scratch() + "/brisk_acc_log_append";
  std::filesystem::remove_all(dir);
  Accelerator acc({.project_dir = dir});
  auto inode = [&](const std::string& f) {
    struct stat st {};
    EXPECT_EQ(::stat((dir + "/" + f).c_str(), &st), 0);
    return st.st_ino;
  };
  auto slurp = [&](const std::string& f) {
    std::ifstream in(dir + "/" + f);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  acc.log({{"loss", 1.0}}, 1);
  const auto csv0 = inode("metrics.csv"), jsonl0 = inode("metrics.jsonl");
  for (int i = 2; i <= 4; ++i) acc.log({{"loss", 1.0 / i}}, i);
  EXPECT_EQ(inode("metrics.csv"), csv0) << "metrics.csv was rewritten by a call with no new key";
  EXPECT_EQ(slurp("metrics.csv"), "step,loss\n1,1.0\n2,0.5\n3,0.3333333333333333\n4,0.25\n");
  acc.log({{"loss", 0.125}, {"note", "a,b"}}, 5);
  EXPECT_NE(inode("metrics.csv"), csv0);
  EXPECT_EQ(inode("metrics.jsonl"), jsonl0);
  EXPECT_EQ(slurp("metrics.csv"), "step,loss,note\n1,1.0,\n2,0.5,\n3,0.3333333333333333,\n4,0.25,\n5,0.125,\"a,b\"\n");
  const auto csv1 = inode("metrics.csv");
  acc.log({{"note", "x"}}, 6);
  EXPECT_EQ(inode("metrics.csv"), csv1);
  const std::string text = slurp("metrics.csv");
  EXPECT_EQ(text.substr(text.rfind("\n5,") + 1), "5,0.125,\"a,b\"\n6,,x\n");
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// What the bar draws, line by line: on a pipe or file (as under ctest) one line per tenth of
// the way, then the final line when it closes.
TEST(Accelerator, ProgressBarDrawsOnTheMainProcess) {
  Accelerator acc;
  ASSERT_TRUE(acc.is_main_process());
  ::testing::internal::CaptureStderr();
  {
    auto bar = acc.progress_bar(4, "steps", "img");
    for (int i = 0; i < 4; ++i) bar.update(1, "loss 0.5");
    EXPECT_EQ(bar.count(), 4);
  }
  const std::string text = ::testing::internal::GetCapturedStderr();
  std::vector<std::string> lines;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) lines.push_back(l);
  // 1/4, 2/4 and 3/4 each start a new tenth; 4/4 is drawn once, by close().
  const std::string time = "[0-9]+(\\.[0-9])?[hms]([0-9]{2}[ms])?", rate = "[0-9]+\\.[0-9] img/s";
  const std::vector<std::string> want = {
      "steps:  25% \\[#{6}\\.{18}\\] 1/4 \\[" + time + "<" + time + ", " + rate + "\\] loss 0\\.5",
      "steps:  50% \\[#{12}\\.{12}\\] 2/4 \\[" + time + "<" + time + ", " + rate + "\\] loss 0\\.5",
      "steps:  75% \\[#{18}\\.{6}\\] 3/4 \\[" + time + "<" + time + ", " + rate + "\\] loss 0\\.5",
      "steps: 100% \\[#{24}\\] 4/4 \\[" + time + ", " + rate + "\\] loss 0\\.5",
  };
  ASSERT_EQ(lines.size(), want.size()) << text;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(std::regex_match(lines[i], std::regex(want[i]))) << "line " << i << ": '" << lines[i] << "'";
  EXPECT_EQ(text.find('\r'), std::string::npos) << "no carriage returns outside a terminal";
}

// Only the main process draws: a bar that is not enabled writes nothing, yet counts.
TEST(Accelerator, ProgressBarOfAnotherProcessIsSilent) {
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar(10, "steps", "it", /*enabled=*/false);
    for (int i = 0; i < 10; ++i) bar.update();
    EXPECT_EQ(bar.count(), 10);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(accelerate::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(accelerate::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(accelerate::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(accelerate::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ParseSize, UnitsAsHuggingFace) {
  EXPECT_EQ(accelerate::parse_size("10GB"), 10'000'000'000);
  EXPECT_EQ(accelerate::parse_size("500MB"), 500'000'000);
  EXPECT_EQ(accelerate::parse_size("2GiB"), 2LL << 30);
  EXPECT_EQ(accelerate::parse_size("100KB"), 100'000);
  EXPECT_EQ(accelerate::parse_size("1234"), 1234);
  EXPECT_THROW(accelerate::parse_size("lots"), Error);
  EXPECT_THROW(accelerate::parse_size("5XB"), Error);
}

TEST(Accelerator, FreeMemoryForgetsThePreparedObjects) {
  Accelerator acc({.gradient_accumulation_steps = 4});
  TinyNet net;
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  data::DataLoader loader(tiny_data(16), {.batch_size = 4});
  acc.prepare(net, opt, loader);
  for (auto& [x, y] : loader) {
    auto s = acc.accumulate(net);
    acc.backward(cross_entropy(net(x), y));
    break;  // micro-step 1 of 4: the optimizer is gated
  }
  opt.step();
  EXPECT_EQ(opt.steps_taken(), 0);
  acc.free_memory();
  opt.step();  // no gate any more
  EXPECT_EQ(opt.steps_taken(), 1);
  acc.prepare(net, opt, loader);  // and they can be prepared again
}

TEST(Accelerator, ObjectsOutlivingTheAcceleratorKeepWorking) {
  TinyNet net;
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  {
    Accelerator acc({.gradient_accumulation_steps = 2});
    acc.prepare(net, opt);
    auto s = acc.accumulate(net);  // micro-step 1 of 2: gated
  }
  auto ds = tiny_data(4);
  cross_entropy(net(ds->data()), ds->targets()).backward();
  opt.step();
  EXPECT_EQ(opt.steps_taken(), 1);
}
