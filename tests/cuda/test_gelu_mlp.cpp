// The GELU MLP (gelu_mlp, a transformer block's c_proj(gelu(c_fc(y)))) on the GPU. In recording
// mode, without a GPU: its products ask cuBLASLt for the GELU_AUX_BIAS epilogue forward and
// DGELU backward (DGELU_BGRAD or none as BRISK_CUDA_DGELU_EPILOGUE says), with no GELU, GELU-backward or bias-sum
// kernel beside them, no cudaMalloc after warm-up and no host wait; a hook falls back to the composite, and the
// kernels' fallback says why it ran unfused. On a real GPU (skips otherwise): cuBLASLt accepts the epilogues at GPT-2's
// shapes, and values and gradients match the CPU's.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/linalg.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/errors.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using cuda::recording::Kind;

namespace {

// How many cublasLtMatmul calls asked for each epilogue.
std::map<std::string, int> gelu_mlp_epilogues(const cuda::recording::Session& rec) {
  std::map<std::string, int> m;
  for (const auto& e : rec.entries(Kind::Library))
    if (e.name == "cublasLtMatmul") ++m[e.detail];
  return m;
}

// Launched kernels the fused MLP must not need: GELU forward or backward, and reductions (a bias sum).
std::string gelu_mlp_unfused_kernels(const cuda::recording::Session& rec) {
  std::string names;
  for (const auto& e : rec.entries(Kind::Launch)) {
    const bool gelu = e.name.find("gelu") != std::string::npos;
    const bool reduction = e.name.find("sum") != std::string::npos || e.name.find("reduce") != std::string::npos;
    if (gelu || reduction) names += e.name + " ";
  }
  return names;
}

// A GPT-2 block's MLP (n_embd 64, hidden 256) and a (2, 16, 64) input that needs a gradient; one
// step runs it forward under bf16 autocast and backward from a fixed bf16 output gradient.
struct GeluMlpStep {
  nn::TransformerBlock block{64, 4};
  Tensor y, grad;
  explicit GeluMlpStep(Device d) {
    block.to(d);
    y = randn({2, 16, 64}).to(d).requires_grad_();
    grad = randn({2, 16, 64}).to(DType::BF16).to(d);
  }
  Tensor operator()() {
    Tensor out;
    {
      amp::Autocast ac(DType::BF16);
      out = block.mlp(y);
    }
    out.backward(grad);
    return out;
  }
};

}  // namespace

TEST(GeluMlpRecording, Bf16AutocastStepUsesTheGeluEpiloguesAndNothingElse) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  manual_seed(3);
  GeluMlpStep step(cuda_device(0));
  for (int i = 0; i < 3; ++i) step();  // warm-up: the caching allocator settles
  rec.clear();
  const Tensor out = step();
  EXPECT_EQ(out.dtype(), DType::BF16);
  // Forward: c_fc with bias + GELU + the pre-activation, c_proj with its bias. Backward: c_proj's
  // weight and bias gradients (the bias as a ones-vector product), d(pre) with b1's gradient in
  // one DGELU product and b1's as another ones-vector product, c_fc's input and weight gradients.
  const std::map<std::string, int> want = {{"GELU_AUX_BIAS", 1}, {"BIAS", 1}, {"DGELU", 1}, {"DEFAULT", 5}};
  EXPECT_EQ(gelu_mlp_epilogues(rec), want);
  EXPECT_EQ(gelu_mlp_unfused_kernels(rec), "");
  EXPECT_EQ(kernels::gelu_epilogue_fallback_reason(), "");
  EXPECT_EQ(rec.count(Kind::Malloc), 0u) << "cudaMalloc after warm-up";
  EXPECT_EQ(rec.count(Kind::Sync), 0u) << "a host wait in the MLP's step";
  for (const Tensor* p :
       {&step.block.c_fc.weight, &step.block.c_fc.bias, &step.block.c_proj.weight, &step.block.c_proj.bias})
    EXPECT_TRUE(p->grad().defined());
  EXPECT_TRUE(step.y.grad().defined());
}

TEST(GeluMlpRecording, AHookOnCFcSeesTheHiddenLayerThroughTheUnfusedMlp) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  manual_seed(3);
  GeluMlpStep step(cuda_device(0));
  Shape seen;
  step.block.c_fc.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) { seen = out.sizes(); });
  rec.clear();
  step();
  EXPECT_EQ(seen, (Shape{2, 16, 256})) << "c_fc's hook did not run";
  const std::map<std::string, int> e = gelu_mlp_epilogues(rec);
  EXPECT_EQ(e.count("GELU_AUX_BIAS") + e.count("DGELU") + e.count("DGELU_BGRAD"), 0u)
      << "fused although a hook must see c_fc's output";
  EXPECT_NE(gelu_mlp_unfused_kernels(rec).find("gelu"), std::string::npos)
      << "the composite's GELU kernels did not run";
}

TEST(GeluMlpRecording, KernelsFallBackWithAReasonWhereCublasLtCannotFuse) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  const Device gpu = cuda_device(0);
  auto t = [&](const Shape& s, DType dt = DType::BF16) { return randn(s).to(dt).to(gpu); };
  struct Case {
    const char* what;
    std::function<void()> run;
    const char* reason;  // a piece of the fallback reason; "" when fused
    std::map<std::string, int> epilogues;
  };
  const std::vector<Case> cases = {
      {"linear_gelu_aux, 24 features",
       [&] {
         kernels::linear_gelu_aux(t({6, 33}), t({24, 33}), t({24}));
       },
       "",
       {{"GELU_AUX_BIAS", 1}}},
      {"linear_gelu_aux, no bias",
       [&] {
         kernels::linear_gelu_aux(t({6, 33}), t({24, 33}), Tensor());
       },
       "",
       {{"GELU_AUX", 1}}},
      {"linear_gelu_aux, 20 features",
       [&] {
         kernels::linear_gelu_aux(t({6, 33}), t({20, 33}), t({20}));
       },
       "multiple of 8",
       {{"BIAS", 1}}},
      {"linear_gelu_aux, one row",
       [&] {
         kernels::linear_gelu_aux(t({1, 33}), t({24, 33}), t({24}));
       },
       "single row",
       {{"DEFAULT", 1}}},
      {"linear_gelu_aux, f64",
       [&] {
         kernels::linear_gelu_aux(t({6, 33}, DType::F64), t({24, 33}, DType::F64), t({24}, DType::F64));
       },
       "f64",
       {}},
      {"matmul_dgelu with the bias gradient",
       [&] {
         kernels::matmul_dgelu(t({6, 16}), t({16, 24}), t({6, 24}), true);
       },
       "",
       {{"DGELU", 1}, {"DEFAULT", 1}}},
      {"matmul_dgelu",
       [&] {
         kernels::matmul_dgelu(t({6, 16}), t({16, 24}), t({6, 24}), false);
       },
       "",
       {{"DGELU", 1}}},
      {"matmul_dgelu, 20 features",
       [&] {
         kernels::matmul_dgelu(t({6, 16}), t({16, 20}), t({6, 20}), true);
       },
       "multiple of 8",
       {{"DEFAULT", 2}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    rec.clear();
    c.run();
    const std::string why = kernels::gelu_epilogue_fallback_reason();
    if (*c.reason == '\0') {
      EXPECT_EQ(why, "");
      EXPECT_EQ(gelu_mlp_unfused_kernels(rec), "");
    } else {
      EXPECT_NE(why.find(c.reason), std::string::npos) << why;
      EXPECT_NE(gelu_mlp_unfused_kernels(rec).find("gelu"), std::string::npos)
          << "the unfused path runs GELU as a kernel";
    }
    EXPECT_EQ(gelu_mlp_epilogues(rec), c.epilogues);
  }
}

TEST(GeluMlpRecording, TheDgeluSwitchPicksTheBackwardsEpilogueOrNone) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  const Device gpu = cuda_device(0);
  auto t = [&](const Shape& s) { return randn(s).to(DType::BF16).to(gpu); };
  const Tensor grad = t({6, 16}), w = t({16, 24}), pre = t({6, 24});
  struct Case {
    const char* value;
    std::map<std::string, int> epilogues;  // dgelu: DGELU, then the ones-vector product for the bias
    const char* reason;                    // a piece of the fallback reason; "" when fused
  };
  const std::vector<Case> cases = {{"", {{"DGELU", 1}, {"DEFAULT", 1}}, ""},
                                   {"bgrad", {{"DGELU_BGRAD", 1}}, ""},
                                   {"dgelu", {{"DGELU", 1}, {"DEFAULT", 1}}, ""},
                                   {"off", {{"DEFAULT", 2}}, "BRISK_CUDA_DGELU_EPILOGUE=off"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("BRISK_CUDA_DGELU_EPILOGUE=") + c.value);
    brisk::testing::ScopedEnv env("BRISK_CUDA_DGELU_EPILOGUE", c.value);
    rec.clear();
    const kernels::MatmulDgelu r = kernels::matmul_dgelu(grad, w, pre, true);
    EXPECT_TRUE(r.grad_bias.defined());
    EXPECT_EQ(gelu_mlp_epilogues(rec), c.epilogues);
    const std::string why = kernels::gelu_epilogue_fallback_reason();
    if (*c.reason == '\0')
      EXPECT_EQ(why, "");
    else
      EXPECT_NE(why.find(c.reason), std::string::npos) << why;
    EXPECT_EQ(gelu_mlp_unfused_kernels(rec).find("gelu") != std::string::npos, *c.reason != '\0')
        << "GELU's backward kernel runs only with the epilogue off";
  }
  brisk::testing::ScopedEnv bad("BRISK_CUDA_DGELU_EPILOGUE", "fast");
  const std::string msg = brisk::testing::error_of([&] { kernels::matmul_dgelu(grad, w, pre, true); });
  ASSERT_NE(msg, "") << "an unknown value was accepted";
  EXPECT_NE(msg.find("BRISK_CUDA_DGELU_EPILOGUE"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'fast'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bgrad"), std::string::npos) << msg;
}

namespace {

// max |a - b| / max |b| over the elements, both taken to f64 on the CPU.
double gelu_mlp_relative_error(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.detach().to(kCPU).to(DType::F64), b64 = b.detach().to(kCPU).to(DType::F64);
  return (a64 - b64).abs().max().item<double>() / std::max(b64.abs().max().item<double>(), 1e-30);
}

}  // namespace

TEST(GeluMlpOnTheGpu, MatchesTheCpuAndCublasLtAcceptsTheEpilogues) {
  SKIP_WITHOUT_GPU();
  // GPT-2 124M's MLP (768 -> 3072 -> 768) over 2 x 64 tokens, and the test block's (64 -> 256 -> 64),
  // with each of BRISK_CUDA_DGELU_EPILOGUE's backward paths.
  for (const char* dgelu : {"bgrad", "dgelu", "off"}) {
    brisk::testing::ScopedEnv env("BRISK_CUDA_DGELU_EPILOGUE", dgelu);
    for (int64_t c : {768, 64}) {
      for (bool bf16 : {false, true}) {
        SCOPED_TRACE(std::to_string(c) + (bf16 ? " bf16 autocast" : " f32") + ", dgelu epilogue " + dgelu);
        manual_seed(11);
        nn::TransformerBlock cpu_block(c, 4);
        nn::TransformerBlock gpu_block(c, 4);
        gpu_block.load_state_dict(cpu_block.state_dict());
        gpu_block.to(cuda_device(0));
        const Tensor y = randn({2, 64, c}), grad = randn({2, 64, c});
        auto run = [&](nn::TransformerBlock& b, const Device& d, std::string* reason) {
          // A leaf of its own on each device: y.to(kCPU) is y itself, and marking y would make the
          // GPU's copy a non-leaf without a .grad().
          const Tensor yd = y.detach().to(d).requires_grad_();
          Tensor out;
          {
            amp::Autocast ac(DType::BF16, bf16);
            out = b.mlp(yd);
          }
          if (reason) *reason = kernels::gelu_epilogue_fallback_reason();
          out.backward(grad.to(out.dtype()).to(d));
          if (reason && reason->empty()) *reason = kernels::gelu_epilogue_fallback_reason();
          return std::vector<Tensor>{
              out, yd.grad(), b.c_fc.weight.grad(), b.c_fc.bias.grad(), b.c_proj.weight.grad(), b.c_proj.bias.grad()};
        };
        std::string reason;
        const std::vector<Tensor> want = run(cpu_block, kCPU, nullptr), got = run(gpu_block, cuda_device(0), &reason);
        if (std::string(dgelu) == "off")
          EXPECT_NE(reason.find("switched off"), std::string::npos) << reason;
        else
          EXPECT_EQ(reason, "") << "cuBLASLt refused a GELU epilogue";
        // f32: the GPU sums in another order and cuBLASLt's tanh is less exact than std::tanh; bf16:
        // one bf16 rounding of the hidden layer and of d(pre) apart.
        const double tol = bf16 ? 3e-2 : 2e-3;
        const char* names[] = {"output",          "y.grad", "c_fc.weight.grad", "c_fc.bias.grad", "c_proj.weight.grad",
                               "c_proj.bias.grad"};
        for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(gelu_mlp_relative_error(got[i], want[i]), tol) << names[i];
      }
    }
  }
}
