// cuDNN's fused attention (kernels/cuda/cudnn_attention.cpp) and the attention backend setting.
// On the host: the plan cache with a fake builder (one build per problem, failures cached with
// their reason), the setting and its environment variable, and in recording mode GPT-2 124M's
// attention step under the cudnn backend (cuDNN's graph descriptors are built and finalized on the
// host; each pass is one cudnnBackendExecute, no brisk attention kernel, no cudaMalloc after the
// first step, no host synchronisation) and the reasons it falls back. With a GPU: cuDNN against
// brisk's kernels and the CPU, causal bf16 and f16, deterministic or not.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/attention.h>
#include <brisk/kernels/attention_plan.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/settings.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/gradcheck.h"
#include "cuda/attention_check.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using brisk::testing::expect_outputs_close;
using brisk::testing::fused_bound;
using brisk::testing::Inputs;
using brisk::testing::leaf;
using brisk::testing::make_inputs;
using brisk::testing::Outputs;
using brisk::testing::relative_error;
using brisk::testing::run;
using kernels::AttentionBackend;
using Kind = cuda::recording::Kind;

namespace {

// Sets the backend for a scope and returns to the environment's afterwards.
class BackendGuard {
 public:
  explicit BackendGuard(AttentionBackend b) { kernels::set_attention_backend(b); }
  ~BackendGuard() { kernels::set_attention_backend(std::nullopt); }
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;
};

kernels::SdpaPlanKey gpt2_key() {
  kernels::SdpaPlanKey key;
  key.dims = {16, 12, 1024, 1024, 64};
  key.scale = 0.125;
  key.causal = true;
  for (int i = 0; i < 4; ++i) key.strides[i] = {int64_t{1024} * 2304, 64, 2304, 1};
  return key;
}

// A plan of the fake builder: which key it was built for.
struct FakePlan {
  kernels::SdpaPlanKey key;
};

}  // namespace

TEST(AttentionPlanCache, BuildsOncePerProblemAndReusesThePlan) {
  int builds = 0;
  kernels::SdpaPlanCache<FakePlan> cache([&](const kernels::SdpaPlanKey& key) {
    ++builds;
    return kernels::SdpaPlanResult<FakePlan>{std::make_shared<FakePlan>(FakePlan{key}), ""};
  });
  const kernels::SdpaPlanKey key = gpt2_key();
  const auto first = cache.get(key);
  ASSERT_TRUE(first.plan);
  EXPECT_EQ(first.plan->key, key);
  EXPECT_EQ(builds, 1);
  for (int step = 0; step < 5; ++step) {
    const auto again = cache.get(key);
    EXPECT_EQ(again.plan.get(), first.plan.get()) << "step " << step << " got another plan";
  }
  EXPECT_EQ(builds, 1) << "later calls for the same problem build nothing";
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.hits(), 5);

  // Every field the plan depends on makes another problem.
  std::vector<kernels::SdpaPlanKey> others(9, key);
  others[0].pass = kernels::SdpaPass::Backward;
  others[1].device = 1;
  others[2].dtype = DType::F16;
  others[3].causal = false;
  others[4].deterministic = true;
  others[5].scale = 0.3;
  others[6].dims[2] = 512;
  others[7].strides[3] = {int64_t{1024} * 768, 64, 768, 1};  // the output contiguous instead of strided
  others[8].recording = true;
  for (size_t i = 0; i < others.size(); ++i) {
    const auto r = cache.get(others[i]);
    ASSERT_TRUE(r.plan) << i;
    EXPECT_EQ(r.plan->key, others[i]) << i;
    EXPECT_NE(r.plan.get(), first.plan.get()) << "variant " << i << " reused the GPT-2 plan";
  }
  EXPECT_EQ(builds, 10);
  EXPECT_EQ(cache.size(), 10u);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.hits(), 0);
  cache.get(key);
  EXPECT_EQ(builds, 11) << "a cleared cache builds again";
}

TEST(AttentionPlanCache, AProblemWithoutAPlanIsTriedOnceAndKeepsItsReason) {
  int builds = 0;
  kernels::SdpaPlanCache<FakePlan> cache([&](const kernels::SdpaPlanKey& key) {
    ++builds;
    if (key.dims[4] == 256) return kernels::SdpaPlanResult<FakePlan>{nullptr, "no engine for head dim 256"};
    if (key.dims[4] == 8) return kernels::SdpaPlanResult<FakePlan>{};  // a builder that forgot to say why
    return kernels::SdpaPlanResult<FakePlan>{std::make_shared<FakePlan>(FakePlan{key}), ""};
  });
  kernels::SdpaPlanKey key = gpt2_key();
  key.dims[4] = 256;
  for (int i = 0; i < 3; ++i) {
    const auto r = cache.get(key);
    EXPECT_FALSE(r.plan);
    EXPECT_EQ(r.why, "no engine for head dim 256");
  }
  EXPECT_EQ(builds, 1) << "a failed build is not retried every step";
  key.dims[4] = 8;
  EXPECT_FALSE(cache.get(key).why.empty()) << "a failure always carries a reason";
  key.dims[4] = 64;
  EXPECT_TRUE(cache.get(key).plan);
  EXPECT_EQ(builds, 3);
}

TEST(AttentionBackendSetting, NamesTheEnvironmentAndTheSetting) {
  for (AttentionBackend b : {AttentionBackend::Cudnn, AttentionBackend::Brisk, AttentionBackend::Math})
    EXPECT_EQ(kernels::parse_attention_backend(kernels::attention_backend_name(b)), b);
  try {
    kernels::parse_attention_backend("flash", "BRISK_CUDA_ATTENTION");
    FAIL() << "an unknown backend was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("BRISK_CUDA_ATTENTION"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'flash'"), std::string::npos) << msg;
    for (const char* name : {"cudnn", "brisk", "math"}) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  {
    brisk::testing::ScopedEnv unset_new("BRISK_CUDA_ATTENTION", "");
    brisk::testing::ScopedEnv unset_old("BRISK_CUDA_FUSED_ATTENTION", "1");
    EXPECT_EQ(kernels::attention_backend(), AttentionBackend::Cudnn) << "the default";
    EXPECT_TRUE(kernels::fused_attention_enabled());
  }
  {
    brisk::testing::ScopedEnv old_off("BRISK_CUDA_FUSED_ATTENTION", "0");
    brisk::testing::ScopedEnv unset_new("BRISK_CUDA_ATTENTION", "");
    EXPECT_EQ(kernels::attention_backend(), AttentionBackend::Math) << "the older switch still turns fusion off";
    EXPECT_FALSE(kernels::fused_attention_enabled());
  }
  brisk::testing::ScopedEnv env("BRISK_CUDA_ATTENTION", "brisk");
  EXPECT_EQ(kernels::attention_backend(), AttentionBackend::Brisk);
  {
    BackendGuard set(AttentionBackend::Math);
    EXPECT_EQ(kernels::attention_backend(), AttentionBackend::Math) << "the setting wins over the environment";
  }
  EXPECT_EQ(kernels::attention_backend(), AttentionBackend::Brisk) << "nullopt returns to the environment";
  brisk::testing::ScopedEnv bad("BRISK_CUDA_ATTENTION", "fast");
  EXPECT_THROW(kernels::attention_backend(), Error);
}

// ---- recording mode: no GPU needed ----

namespace {

std::vector<std::string> names_of(const cuda::recording::Session& rec, Kind kind) {
  std::vector<std::string> out;
  for (const auto& e : rec.entries(kind)) out.push_back(e.name);
  return out;
}

size_t launches_starting(const cuda::recording::Session& rec, const std::string& prefix) {
  size_t n = 0;
  for (const auto& e : rec.entries(Kind::Launch)) n += e.name.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// One GPT-2 124M attention step through the packed op (B 16, T 1024, 12 heads of 64, bf16);
// returns why the forward and the backward did not run on cuDNN ("" each when they did).
std::pair<std::string, std::string> gpt2_attention_step() {
  const int64_t B = 16, T = 1024, H = 12, C = 768;
  Tensor x = leaf(empty({B, T, 3 * C}, DType::BF16, cuda_device()));
  Tensor y = scaled_dot_product_attention_packed(x, H, {.is_causal = true});
  const std::string forward_why = kernels::attention_fallback_reason();
  y.backward(empty({B, T, C}, DType::BF16, cuda_device()));
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  return {forward_why, kernels::attention_fallback_reason()};
}

}  // namespace

TEST(CudnnAttentionRecording, Gpt2StepIsTwoCudnnExecutesAndReusesItsPlans) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  BackendGuard cudnn(AttentionBackend::Cudnn);
  kernels::clear_attention_plans();
  const auto [forward_why, backward_why] = gpt2_attention_step();
  EXPECT_EQ(forward_why, "") << "the forward fell back";
  EXPECT_EQ(backward_why, "") << "the backward fell back";
  EXPECT_EQ(names_of(rec, Kind::Library), (std::vector<std::string>{"cudnnBackendExecute", "cudnnBackendExecute"}));
  EXPECT_EQ(launches_starting(rec, "attention_"), 0u) << "no brisk attention kernel";
  EXPECT_EQ(launches_starting(rec, "softmax"), 0u) << "no blocked path";
  EXPECT_EQ(rec.count(Kind::Copy), 0u) << "q, k, v read in place, dq, dk, dv written into the packed gradient";
  EXPECT_EQ(kernels::attention_plan_stats().built, 2) << "a forward and a backward plan";

  rec.clear();
  gpt2_attention_step();
  EXPECT_EQ(names_of(rec, Kind::Library), (std::vector<std::string>{"cudnnBackendExecute", "cudnnBackendExecute"}));
  EXPECT_EQ(rec.count(Kind::Malloc), 0u) << "the second step allocates nothing new (workspace from the cache)";
  EXPECT_EQ(rec.count(Kind::Sync), 0u) << "no host synchronisation";
  EXPECT_EQ(kernels::attention_plan_stats().built, 2) << "the second step builds no plan";
  EXPECT_EQ(kernels::attention_plan_stats().reused, 2);

  // Non-deterministic backward: another graph (dQ through an f32 accumulator), so another plan.
  {
    kernels::DeterministicGuard off(false);
    rec.clear();
    EXPECT_EQ(gpt2_attention_step().second, "");
    EXPECT_EQ(kernels::attention_plan_stats().built, 3);
    EXPECT_EQ(names_of(rec, Kind::Library).size(), 2u);
  }
}

// cuDNN finalizes every node of both graphs on the host: each dtype, mask, head dim, backward
// form, and keys other than queries (not causal). A node it rejects would show here as a reason.
TEST(CudnnAttentionRecording, EveryGraphVariantIsAcceptedNodeByNode) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  BackendGuard cudnn(AttentionBackend::Cudnn);
  kernels::clear_attention_plans();
  int64_t variants = 0;
  for (DType dt : {DType::BF16, DType::F16}) {
    for (bool causal : {true, false}) {
      for (int64_t D : {32, 64, 128}) {
        for (bool det : {true, false}) {
          kernels::DeterministicGuard d(det);
          const int64_t tk = causal ? 200 : 70;
          const Tensor q = empty({2, 3, 200, D}, dt, cuda_device()), k = empty({2, 3, tk, D}, dt, cuda_device());
          const std::string what = std::string(dtype_name(dt)) + (causal ? " causal" : " full") +
                                   " D=" + std::to_string(D) + (det ? " deterministic" : "");
          const kernels::AttentionForwardResult f = kernels::attention_forward(q, k, k, causal, 0.3);
          EXPECT_EQ(kernels::attention_fallback_reason(), "") << what << " forward";
          kernels::attention_backward(f.out, q, k, k, f.out, f.lse, causal, 0.3);
          EXPECT_EQ(kernels::attention_fallback_reason(), "") << what << " backward";
          ++variants;
        }
      }
    }
  }
  EXPECT_EQ(rec.count(Kind::Library), static_cast<size_t>(2 * variants));
  EXPECT_EQ(launches_starting(rec, "attention_"), 0u);
  // Forward plans do not depend on the determinism setting: 12 of them; backward plans do: 24.
  EXPECT_EQ(kernels::attention_plan_stats().built, 36);
}

TEST(CudnnAttentionRecording, TheOtherBackendsCallNoCudnn) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  {
    BackendGuard brisk_kernels(AttentionBackend::Brisk);
    gpt2_attention_step();
    EXPECT_EQ(rec.count(Kind::Library), 0u);
    EXPECT_EQ(launches_starting(rec, "attention_"), 4u) << "brisk's forward, delta, dK/dV and dQ kernels";
  }
  rec.clear();
  {
    BackendGuard math(AttentionBackend::Math);
    const Tensor q = leaf(empty({1, 2, 130, 64}, DType::BF16, cuda_device()));
    Tensor y = scaled_dot_product_attention(q, q, q, {.is_causal = true});
    y.backward(empty(y.sizes(), DType::BF16, cuda_device()));
    EXPECT_EQ(launches_starting(rec, "attention_"), 0u);
    for (const std::string& name : names_of(rec, Kind::Library))
      EXPECT_EQ(name.rfind("cudnn", 0), std::string::npos) << name << " under the math backend";
    EXPECT_GT(launches_starting(rec, "softmax"), 0u) << "the blocked path";
  }
}

TEST(CudnnAttentionRecording, FallsBackToBriskKernelsSayingWhy) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  BackendGuard cudnn(AttentionBackend::Cudnn);
  // f32: cuDNN's fused attention takes 16-bit inputs only; brisk's f32 kernels run.
  const Tensor q32 = empty({2, 3, 130, 64}, DType::F32, cuda_device());
  std::string why;
  EXPECT_FALSE(kernels::cudnn_attention_supported(q32, q32, q32, true, &why));
  EXPECT_NE(why.find("dtype f32"), std::string::npos) << why;
  const kernels::AttentionForwardResult r = kernels::attention_forward(q32, q32, q32, true, 0.125);
  EXPECT_NE(kernels::attention_fallback_reason().find("dtype f32"), std::string::npos)
      << kernels::attention_fallback_reason();
  EXPECT_EQ(rec.count(Kind::Library), 0u);
  EXPECT_EQ(launches_starting(rec, "attention_forward"), 1u);

  // What brisk's kernels do not take, cuDNN's attention does not either (the op's blocked path).
  const Tensor q48 = empty({2, 3, 130, 48}, DType::BF16, cuda_device());
  EXPECT_FALSE(kernels::cudnn_attention_supported(q48, q48, q48, true, &why));
  EXPECT_NE(why.find("head dim 48"), std::string::npos) << why;

  // Gradient outputs cuDNN cannot write (strides not multiples of 8): brisk's backward runs.
  rec.clear();
  const Tensor q = empty({2, 3, 130, 64}, DType::BF16, cuda_device());
  const kernels::AttentionForwardResult f = kernels::attention_forward(q, q, q, true, 0.125);
  EXPECT_EQ(kernels::attention_fallback_reason(), "");
  const Tensor wide = empty({2, 130, 3, 66}, DType::BF16, cuda_device());
  const Tensor odd = wide.as_strided({2, 3, 130, 64}, {int64_t{130} * 3 * 66, 66, int64_t{3} * 66, 1}, wide.offset());
  const kernels::AttentionGrads into{odd, odd, odd};
  kernels::attention_backward(q, q, q, q, f.out, f.lse, true, 0.125, &into);
  EXPECT_NE(kernels::attention_fallback_reason().find("gradient output with strides"), std::string::npos)
      << kernels::attention_fallback_reason();
  EXPECT_EQ(names_of(rec, Kind::Library), std::vector<std::string>{"cudnnBackendExecute"}) << "the forward only";
  EXPECT_EQ(launches_starting(rec, "attention_backward_q"), 1u);
}

// ---- on a GPU ----

TEST(CudnnAttention, MatchesBriskKernelsAndTheCpu) {
  SKIP_WITHOUT_GPU();
  std::string why;
  const Tensor probe = empty({1, 1, 64, 64}, DType::BF16, cuda_device());
  if (!kernels::cudnn_attention_supported(probe, probe, probe, true, &why)) GTEST_SKIP() << why;
  struct Case {
    int64_t B, H, T, D;
    bool causal;
  };
  uint64_t seed = 500;
  for (const Case& c : {Case{2, 3, 64, 64, true}, Case{2, 3, 200, 64, true}, Case{1, 2, 200, 128, true},
                        Case{2, 2, 1024, 64, true}, Case{2, 3, 130, 64, false}}) {
    const Inputs in = make_inputs(c.B, c.H, c.T, c.D, seed);
    seed += 10;
    const Outputs want = run(in, DType::F32, kCPU, c.causal);
    for (DType dt : {DType::BF16, DType::F16}) {
      for (bool det : {true, false}) {
        kernels::DeterministicGuard d(det);
        const std::string what = std::string(dtype_name(dt)) + (c.causal ? " causal" : " full") +
                                 " T=" + std::to_string(c.T) + " D=" + std::to_string(c.D) +
                                 (det ? " deterministic" : " non-deterministic");
        Outputs cudnn, brisk_kernels;
        {
          BackendGuard b(AttentionBackend::Cudnn);
          cudnn = run(in, dt, cuda_device(), c.causal);
          // Empty unless this GPU has no deterministic cuDNN backward (then it says so).
          if (!det) {
            EXPECT_EQ(kernels::attention_fallback_reason(), "") << what;
          }
        }
        {
          BackendGuard b(AttentionBackend::Brisk);
          brisk_kernels = run(in, dt, cuda_device(), c.causal);
        }
        expect_outputs_close(cudnn, want, fused_bound(dt), what + " cudnn vs cpu");
        expect_outputs_close(brisk_kernels, want, fused_bound(dt), what + " brisk vs cpu");
        expect_outputs_close(cudnn, brisk_kernels, 2 * fused_bound(dt), what + " cudnn vs brisk");
      }
    }
  }
}

TEST(CudnnAttention, DeterministicBackwardGivesTheSameBitsTwice) {
  SKIP_WITHOUT_GPU();
  const Inputs in = make_inputs(2, 3, 256, 64, 1);
  kernels::DeterministicGuard det(true);
  BackendGuard b(AttentionBackend::Cudnn);
  const Outputs a = run(in, DType::BF16, cuda_device(), true);
  const std::string reason = kernels::attention_fallback_reason();
  const Outputs again = run(in, DType::BF16, cuda_device(), true);
  EXPECT_EQ(relative_error(a.dq, again.dq), 0.0) << "backend: " << (reason.empty() ? "cudnn" : reason);
  EXPECT_EQ(relative_error(a.dk, again.dk), 0.0);
  EXPECT_EQ(relative_error(a.dv, again.dv), 0.0);
}
