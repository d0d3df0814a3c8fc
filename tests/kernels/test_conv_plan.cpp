// The cuDNN convolution plan cache's logic (brisk/kernels/conv_plan.h), on the host with a fake
// plan: one build per problem and a lookup after, keys that separate what changes the algorithm
// (deterministic mode, math mode, benchmark mode, recording), the bound, per-device clearing, and
// the ranking that keeps deterministic mode on deterministic algorithms.
#include <gtest/gtest.h>

#include <brisk/kernels/conv_plan.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace brisk;
using kernels::ConvAlgoCandidate;
using kernels::ConvPass;
using kernels::ConvPlanCache;
using kernels::ConvPlanKey;

namespace {

struct FakeConvPlan {
  int algo = 0;
};

// The example CNN's second convolution's backward data pass (batch 64, 16 -> 32, 3x3, pad 1).
ConvPlanKey conv_cnn_key(int device = 0) {
  ConvPlanKey k;
  k.pass = ConvPass::BackwardData;
  k.device = device;
  k.dtype = DType::F32;
  k.dims = {64, 16, 14, 14, 32, 16, 3, 3, 14, 14};
  k.options = {1, 1, 1, 1, 1, 1, 1};
  k.deterministic = true;
  return k;
}

// What a caller does: a lookup, and a build (counted) on a miss.
std::shared_ptr<const FakeConvPlan> get_conv_plan(ConvPlanCache<FakeConvPlan>& cache, const ConvPlanKey& key,
                                                  int* builds) {
  if (auto p = cache.find(key)) return p;
  ++*builds;
  return cache.insert(key, std::make_shared<FakeConvPlan>(FakeConvPlan{*builds}));
}

}  // namespace

TEST(ConvPlanCache, BuildsOncePerProblemAndReusesAfter) {
  ConvPlanCache<FakeConvPlan> cache;
  int builds = 0;
  const auto first = get_conv_plan(cache, conv_cnn_key(), &builds);
  for (int step = 0; step < 10; ++step) EXPECT_EQ(get_conv_plan(cache, conv_cnn_key(), &builds), first);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.stats().built, 1);
  EXPECT_EQ(cache.stats().reused, 10);
  EXPECT_EQ(cache.stats().size, 1u);
}

TEST(ConvPlanCache, KeysSeparateWhatChangesTheAlgorithm) {
  ConvPlanCache<FakeConvPlan> cache;
  int builds = 0;
  get_conv_plan(cache, conv_cnn_key(), &builds);
  std::vector<ConvPlanKey> others(9, conv_cnn_key());
  others[0].deterministic = false;
  others[1].math = 1;  // f32 without TF32
  others[2].benchmark = true;
  others[3].recording = true;
  others[4].pass = ConvPass::BackwardFilter;
  others[5].dtype = DType::BF16;
  others[6].dims[0] = 16;     // the last chunk of a batch
  others[7].options[2] = 0;   // padding
  others[8].options[6] = 16;  // groups
  for (const ConvPlanKey& k : others) get_conv_plan(cache, k, &builds);
  EXPECT_EQ(builds, 10) << "each key its own plan";
  for (const ConvPlanKey& k : others) get_conv_plan(cache, k, &builds);
  EXPECT_EQ(builds, 10) << "and each found again";
}

TEST(ConvPlanCache, ReplacingAPlanThatCouldNotRunKeepsOneEntry) {
  ConvPlanCache<FakeConvPlan> cache;
  cache.insert(conv_cnn_key(), std::make_shared<FakeConvPlan>(FakeConvPlan{1}));
  cache.insert(conv_cnn_key(), std::make_shared<FakeConvPlan>(FakeConvPlan{2}));
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_EQ(cache.find(conv_cnn_key())->algo, 2);
}

TEST(ConvPlanCache, HoldsAtMostItsCapacityDroppingTheOldest) {
  ConvPlanCache<FakeConvPlan> cache(4);
  int builds = 0;
  std::vector<ConvPlanKey> keys;
  for (int64_t n = 1; n <= 6; ++n) {
    keys.push_back(conv_cnn_key());
    keys.back().dims[0] = n;
  }
  std::shared_ptr<const FakeConvPlan> oldest = get_conv_plan(cache, keys[0], &builds);
  for (const ConvPlanKey& k : keys) get_conv_plan(cache, k, &builds);
  EXPECT_EQ(cache.stats().size, 4u);
  EXPECT_EQ(cache.find(keys[0]), nullptr) << "the oldest went";
  EXPECT_EQ(cache.find(keys[1]), nullptr);
  EXPECT_NE(cache.find(keys[5]), nullptr);
  EXPECT_EQ(oldest->algo, 1) << "a plan still held by its user outlives its eviction";
}

TEST(ConvPlanCache, ClearsOneDeviceOrAll) {
  ConvPlanCache<FakeConvPlan> cache;
  int builds = 0;
  for (int d : {0, 1, 1}) get_conv_plan(cache, conv_cnn_key(d), &builds);
  cache.clear(1);
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_NE(cache.find(conv_cnn_key(0)), nullptr);
  EXPECT_EQ(cache.find(conv_cnn_key(1)), nullptr);
  cache.clear();
  EXPECT_EQ(cache.stats().size, 0u);
  EXPECT_EQ(cache.stats().built, 0);
  EXPECT_EQ(cache.stats().reused, 0);
}

TEST(ConvPlanCache, ThreadsShareOnePlanPerProblem) {
  ConvPlanCache<FakeConvPlan> cache;
  const auto plan = cache.insert(conv_cnn_key(), std::make_shared<FakeConvPlan>(FakeConvPlan{7}));
  std::vector<std::thread> threads;
  std::vector<int> seen(8, 0);
  for (size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) seen[t] += cache.find(conv_cnn_key()) == plan ? 1 : 0;
    });
  for (auto& th : threads) th.join();
  for (int s : seen) EXPECT_EQ(s, 1000);
  EXPECT_EQ(cache.stats().reused, 8000);
}

// cuDNN lists algorithms fastest first with a determinism flag each: deterministic mode tries only
// the deterministic ones (in cuDNN's order); otherwise they still come first, then the rest.
TEST(ConvPlanCache, DeterministicModeRanksOnlyDeterministicAlgorithms) {
  const std::vector<ConvAlgoCandidate> reported = {
      {.algo = 0, .memory = 0, .ok = true, .deterministic = false},  // fastest, atomics
      {.algo = 1, .memory = 64, .ok = true, .deterministic = true},
      {.algo = 3, .memory = 0, .ok = false, .deterministic = true},  // not supported here
      {.algo = 5, .memory = 8, .ok = true, .deterministic = true},
      {.algo = 6, .memory = 0, .ok = true, .deterministic = false},
  };
  auto algos = [](const std::vector<ConvAlgoCandidate>& v) {
    std::vector<int> out;
    out.reserve(v.size());
    for (const auto& c : v) out.push_back(c.algo);
    return out;
  };
  EXPECT_EQ(algos(kernels::rank_conv_algorithms(reported, true)), (std::vector<int>{1, 5}));
  EXPECT_EQ(algos(kernels::rank_conv_algorithms(reported, false)), (std::vector<int>{1, 5, 0, 6}));
  for (const auto& c : kernels::rank_conv_algorithms(reported, true)) EXPECT_TRUE(c.deterministic) << c.algo;
}
