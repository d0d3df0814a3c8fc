// The autocast weight cache and optimizers' autocast copies on the CPU: each parameter is cast
// once per outermost autocast region (or not at all once AdamW keeps its bf16 copy), with the
// same loss, gradients and parameters, bit for bit, as casting in every op; a parameter written
// in place is never served from a stale copy; the cache is empty once the outermost guard ends.
#include <gtest/gtest.h>

#include <brisk/amp/autocast.h>
#include <brisk/autograd/autocast.h>
#include <brisk/brisk.h>
#include <brisk/core/autocast_cache.h>
#include <brisk/core/profiler.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace brisk;
using models::GPT2;
using models::GPT2Config;

namespace {

// The bits of a floating tensor's values (f32 after a widening that is exact for every dtype).
std::vector<uint32_t> cache_test_bits(const Tensor& t) {
  const std::vector<float> v = t.detach().to_vector<float>();
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// Weight casts made since the last reset: the profiler row autocast gives each cast of a parameter.
int64_t weight_casts() {
  for (const profiler::Row& r : profiler::key_averages())
    if (r.name == "autocast_weight_cast") return r.calls;
  return 0;
}

// A linear layer used twice in one forward (its weight has two uses), then a second one.
struct TwiceNet : nn::CallableModule<TwiceNet> {
  nn::Linear a{8, 8}, b{8, 4};
  TwiceNet() { register_modules({{"a", a}, {"b", b}}); }
  Tensor forward(const Tensor& x) override { return b(relu(a(relu(a(x))))); }
};

// How a training step runs under bf16 autocast.
enum class Casts {
  EveryOp,          // cache_enabled = false: every op casts (the reference)
  RegionPerMicro,   // one guard per micro-step: the cache lives for one forward
  RegionPerStep,    // one guard around every micro-step of a step: one cast per step
  OptimizerCopies,  // AdamW keeps bf16 copies (a guard per micro-step)
};

struct Trace {
  std::vector<std::vector<uint32_t>> losses, grads, params;
  std::vector<int64_t> casts;  // weight casts per step
};

// `steps` AdamW steps of GPT-2 tiny, `micro` micro-steps each (loss / micro, accumulated), bits
// of every loss, gradient and parameter recorded after each step.
Trace train_gpt2(Casts casts, int steps, int micro) {
  GPT2Config c = GPT2Config::preset("tiny");
  c.block_size = 16;
  manual_seed(11);
  GPT2 model(c);
  optim::AdamW opt(model.param_groups({.lr = 1e-2, .weight_decay = 0.1}));
  if (casts == Casts::OptimizerCopies) opt.keep_autocast_copies(DType::BF16);
  Generator gen(5);
  Trace t;
  for (int s = 0; s < steps; ++s) {
    profiler::reset();
    {
      std::optional<amp::Autocast> step_region;
      if (casts == Casts::RegionPerStep) step_region.emplace(DType::BF16);
      for (int m = 0; m < micro; ++m) {
        Tensor idx = randint(0, c.vocab_size, {2, 16}, {.dtype = DType::I64}, &gen);
        Tensor targets = randint(0, c.vocab_size, {2, 16}, {.dtype = DType::I64}, &gen);
        Tensor loss;
        {
          amp::Autocast region(DType::BF16, true, casts != Casts::EveryOp);
          loss = GPT2::loss(model(idx), targets) / static_cast<double>(micro);
        }
        loss.backward();
        t.losses.push_back(cache_test_bits(loss));
      }
    }
    t.casts.push_back(weight_casts());
    for (const Tensor& p : model.parameters()) t.grads.push_back(cache_test_bits(p.grad()));
    opt.step();
    opt.zero_grad();
    for (const Tensor& p : model.parameters()) t.params.push_back(cache_test_bits(p));
  }
  return t;
}

void expect_same_training(const Trace& got, const Trace& want, const std::string& what) {
  EXPECT_EQ(got.losses, want.losses) << what << ": losses differ";
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) EXPECT_EQ(got.grads[i], want.grads[i]) << what << ": gradient " << i;
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t i = 0; i < got.params.size(); ++i)
    EXPECT_EQ(got.params[i], want.params[i]) << what << ": parameter " << i;
}

// GPT-2 tiny's parameters that autocast casts to bf16: weight and bias of the four linear layers
// of each block, and the tied head (wte, whose embedding lookup is not autocast).
int64_t gpt2_cast_parameters(const GPT2Config& c) {
  return 8 * c.n_layer + 1;
}

}  // namespace

// The profiler records for the test's duration (it is how the casts are counted). Outside the
// anonymous namespace: the tests derive from it.
class AutocastCache : public ::testing::Test {
 protected:
  void SetUp() override {
    profiler::enable();
    profiler::reset();
  }
  void TearDown() override {
    profiler::disable();
    profiler::reset();
  }
};

TEST_F(AutocastCache, Gpt2TrainsBitForBitAsWhenEveryOpCasts) {
  const Trace want = train_gpt2(Casts::EveryOp, 3, 2);
  expect_same_training(train_gpt2(Casts::RegionPerMicro, 3, 2), want, "cache per micro-step");
  expect_same_training(train_gpt2(Casts::RegionPerStep, 3, 2), want, "cache per step");
  expect_same_training(train_gpt2(Casts::OptimizerCopies, 3, 2), want, "AdamW's bf16 copies");
}

TEST_F(AutocastCache, EachWeightIsCastOncePerOutermostRegion) {
  const int64_t n = gpt2_cast_parameters(GPT2Config::preset("tiny"));
  // Two micro-steps in one region: one cast per weight and step, not one per micro-step.
  EXPECT_EQ(train_gpt2(Casts::RegionPerStep, 3, 2).casts, std::vector<int64_t>({n, n, n}));
  // A region per micro-step: the cache ends with each region, as PyTorch's.
  EXPECT_EQ(train_gpt2(Casts::RegionPerMicro, 2, 2).casts, std::vector<int64_t>({2 * n, 2 * n}));
  EXPECT_EQ(train_gpt2(Casts::EveryOp, 1, 1).casts, std::vector<int64_t>({0})) << "no cache, no cache casts";
}

TEST_F(AutocastCache, AdamWCopiesLeaveNoWeightCastAfterTheFirstStep) {
  const int64_t n = gpt2_cast_parameters(GPT2Config::preset("tiny"));
  // The first step's forwards cast (no copy exists before an optimizer step); every later one
  // reads the copies AdamW wrote in its update.
  EXPECT_EQ(train_gpt2(Casts::OptimizerCopies, 4, 2).casts, std::vector<int64_t>({2 * n, 0, 0, 0}));
}

TEST_F(AutocastCache, AWeightUsedTwiceGetsTheSameGradientAsTwoCasts) {
  manual_seed(2);
  Tensor x = randn({5, 8});
  std::vector<std::vector<uint32_t>> grads[2];
  for (int cached = 0; cached < 2; ++cached) {
    manual_seed(3);
    TwiceNet net;
    Tensor loss;
    {
      amp::Autocast ac(DType::BF16, true, cached == 1);
      loss = sum(net(x));
    }
    loss.backward();
    for (const Tensor& p : net.parameters()) grads[cached].push_back(cache_test_bits(p.grad()));
    EXPECT_EQ(weight_casts(), cached ? 4 : 0) << "a's weight and bias cast once for two uses, then b's";
    profiler::reset();
  }
  EXPECT_EQ(grads[0], grads[1]) << "each use has its own cast node: gradients add in f32, as with two casts";
}

TEST_F(AutocastCache, AParameterWrittenInPlaceIsCastAgain) {
  manual_seed(4);
  nn::Linear fc(6, 3);
  Tensor x = randn({2, 6});
  amp::Autocast ac(DType::BF16);
  const Tensor y1 = fc(x);
  {
    NoGradGuard no_grad;
    fc.weight.mul_(2.0);
  }
  const Tensor y2 = fc(x);
  Tensor fresh;
  {
    amp::Autocast nocache(DType::BF16, true, /*cache_enabled=*/false);
    fresh = fc(x);
  }
  EXPECT_EQ(cache_test_bits(y2), cache_test_bits(fresh))
      << "the cache served the weight from before the in-place write";
  EXPECT_NE(cache_test_bits(y1), cache_test_bits(y2));
  // A new storage (set_data, as Module::to does) is a different tensor too.
  {
    NoGradGuard no_grad;
    fc.weight.set_data(fc.weight.detach().clone().mul(0.5));
  }
  {
    amp::Autocast nocache(DType::BF16, true, false);
    fresh = fc(x);
  }
  EXPECT_EQ(cache_test_bits(fc(x)), cache_test_bits(fresh));
}

TEST_F(AutocastCache, AnOptimizerCopyIsNotServedAfterTheParameterChanges) {
  manual_seed(5);
  nn::Linear fc(6, 3);
  optim::AdamW opt(fc.parameters(), {.lr = 0.1});
  opt.keep_autocast_copies(DType::BF16);
  Tensor x = randn({4, 6});
  {
    amp::Autocast ac(DType::BF16);
    sum(fc(x)).backward();
  }
  opt.step();
  ASSERT_TRUE(autograd::current_autocast_copy(fc.weight, DType::BF16).defined());
  EXPECT_EQ(cache_test_bits(autograd::current_autocast_copy(fc.weight, DType::BF16)),
            cache_test_bits(fc.weight.detach().to(DType::BF16)))
      << "AdamW's copy is the cast of the updated weight, bit for bit";
  {
    NoGradGuard no_grad;
    fc.weight.add_(1.0);  // e.g. a user's edit, or load_state_dict
  }
  EXPECT_FALSE(autograd::current_autocast_copy(fc.weight, DType::BF16).defined());
  profiler::reset();
  Tensor served, fresh;
  {
    amp::Autocast ac(DType::BF16);
    served = fc(x);
  }
  {
    amp::Autocast nocache(DType::BF16, true, false);
    fresh = fc(x);
  }
  EXPECT_EQ(cache_test_bits(served), cache_test_bits(fresh)) << "a stale optimizer copy was served";
  EXPECT_EQ(weight_casts(), 1) << "the changed weight is cast again (the bias still has its copy)";
}

TEST_F(AutocastCache, ACastMadeUnderNoGradStillCarriesTheGradientLater) {
  manual_seed(6);
  nn::Linear fc(4, 2);
  Tensor x = randn({3, 4});
  Tensor loss;
  {
    amp::Autocast ac(DType::BF16);
    {
      NoGradGuard no_grad;
      fc(x);  // fills the cache with casts that have no graph
    }
    loss = sum(fc(x));
  }
  loss.backward();
  ASSERT_TRUE(fc.weight.grad().defined()) << "the cached cast must reach the parameter";
  EXPECT_EQ(weight_casts(), 2);
}

TEST_F(AutocastCache, TheCacheIsEmptyOnceTheOutermostGuardEnds) {
  manual_seed(7);
  nn::Linear fc(4, 2);
  Tensor x = randn({3, 4});
  EXPECT_EQ(autocast_cache_size(), 0u);
  {
    amp::Autocast outer(DType::BF16);
    fc(x);
    EXPECT_EQ(autocast_cache_size(), 2u) << "weight and bias";
    {
      amp::Autocast inner(DType::BF16, /*enabled=*/false);
      fc(x);
    }
    EXPECT_EQ(autocast_cache_size(), 2u) << "an inner guard leaves the outer region's cache alone";
    EXPECT_EQ(autocast_nesting(), 1);
  }
  EXPECT_EQ(autocast_nesting(), 0);
  EXPECT_EQ(autocast_cache_size(), 0u) << "the outermost guard empties the cache";
  {
    amp::Autocast off(DType::BF16, true, /*cache_enabled=*/false);
    fc(x);
    EXPECT_EQ(autocast_cache_size(), 0u) << "cache_enabled = false caches nothing";
  }
}
