// Fused attention on the GPU (kernels/cuda/attention.cu) through scaled_dot_product_attention:
// the output and all three gradients against the CPU (f32, from the same inputs) and against the
// blocked GPU path (BRISK_CUDA_ATTENTION=math), f32, f16 and bf16, causal or not, T from 1 to 1024
// (one row, a tile less one, a tile, a tile plus one, a ragged 200, GPT-2's 1024), head dims 64,
// 128 and 80, B * H > 1; gradients written into NaN-filled memory (an element never written
// stays NaN and fails); shapes and dtypes the fused kernels do not take fall back and agree. In
// recording mode (no GPU needed): which kernels the op launches, with which grids and shared
// memory, and that the switch and unsupported shapes take the blocked path.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/attention.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/gradcheck.h"
#include "cuda/attention_check.h"
#include "cuda/exact_input.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using brisk::testing::blocked_bound;
using brisk::testing::describe;
using brisk::testing::exact_input;
using brisk::testing::expect_outputs_close;
using brisk::testing::fused_bound;
using brisk::testing::Inputs;
using brisk::testing::leaf;
using brisk::testing::make_inputs;
using brisk::testing::Outputs;
using brisk::testing::relative_error;
using brisk::testing::run;

namespace {

// Picks brisk's fused kernels (on) or the blocked path (off) for a scope through
// BRISK_CUDA_ATTENTION (the op reads it at each call); cuDNN's attention has its own tests
// (test_cudnn_attention.cpp).
class FusedAttentionSwitch : public brisk::testing::ScopedEnv {
 public:
  explicit FusedAttentionSwitch(bool on) : ScopedEnv("BRISK_CUDA_ATTENTION", on ? "brisk" : "math") {}
};

}  // namespace

TEST(CudaAttention, FusedMatchesTheCpuAndTheBlockedPath) {
  SKIP_WITHOUT_GPU();
  const int64_t B = 2, H = 3;
  struct Shape2 {
    int64_t T, D;
  };
  std::vector<Shape2> shapes;
  for (int64_t T : {1, 63, 64, 65, 200})
    for (int64_t D : {64, 128, 80}) shapes.push_back({T, D});
  shapes.push_back({1024, 64});  // GPT-2's shape (the CPU reference is the slow part)
  uint64_t seed = 100;
  for (const Shape2& s : shapes) {
    const Inputs in = make_inputs(B, H, s.T, s.D, seed += 10);
    for (bool causal : {true, false}) {
      const Outputs want = run(in, DType::F32, kCPU, causal);
      for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
        const std::string what = describe(dt, causal, s.T, s.D);
        ASSERT_TRUE(kernels::fused_attention_supported(in.q.to(dt).to(cuda_device()), in.k.to(dt).to(cuda_device()),
                                                       in.v.to(dt).to(cuda_device()), causal))
            << what;
        Outputs fused, blocked;
        {
          FusedAttentionSwitch on(true);
          fused = run(in, dt, cuda_device(), causal);
        }
        {
          FusedAttentionSwitch off(false);
          blocked = run(in, dt, cuda_device(), causal);
        }
        expect_outputs_close(fused, want, fused_bound(dt), what + " fused vs cpu");
        expect_outputs_close(blocked, want, blocked_bound(dt), what + " blocked vs cpu");
        expect_outputs_close(fused, blocked, blocked_bound(dt), what + " fused vs blocked");
      }
    }
  }
}

TEST(CudaAttention, GivenScaleAndLeadingDimsOtherThanTwo) {
  SKIP_WITHOUT_GPU();
  // (3, 70, 64): one leading dim; scale 0.3 instead of 1/sqrt(64).
  const Tensor q = exact_input({3, 70, 64}, 1), k = exact_input({3, 70, 64}, 2), v = exact_input({3, 70, 64}, 3);
  const Inputs in{q, k, v, exact_input({3, 70, 64}, 4)};
  for (bool causal : {true, false}) {
    const Outputs want = run(in, DType::F32, kCPU, causal, 0.3);
    for (DType dt : {DType::BF16, DType::F16, DType::F32})
      expect_outputs_close(run(in, dt, cuda_device(), causal, 0.3), want, fused_bound(dt),
                           describe(dt, causal, 70, 64) + " scale 0.3, 3 dims");
  }
}

TEST(CudaAttention, StridedInputsFromASplitProjection) {
  SKIP_WITHOUT_GPU();
  // q, k, v as nn::CausalSelfAttention makes them: views of one (B, T, 3C) projection, heads
  // split and transposed to (B, H, T, D) (T stride 3C, not contiguous).
  const int64_t B = 2, T = 130, H = 2, D = 64, C = H * D;
  const Tensor qkv = exact_input({B, T, 3 * C}, 7), gy = exact_input({B, H, T, D}, 8);
  auto split = [&](const Tensor& t, int i) { return t.narrow(2, i * C, C).view({B, T, H, D}).transpose(1, 2); };
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    Tensor x = leaf(qkv.to(dt).to(cuda_device()));
    Tensor y = scaled_dot_product_attention(split(x, 0), split(x, 1), split(x, 2), {.is_causal = true});
    y.backward(gy.to(dt).to(cuda_device()));
    Tensor xc = leaf(qkv);
    Tensor yc = scaled_dot_product_attention(split(xc, 0), split(xc, 1), split(xc, 2), {.is_causal = true});
    yc.backward(gy);
    EXPECT_LE(relative_error(y.detach().to(kCPU), yc.detach()), fused_bound(dt)) << dtype_name(dt);
    EXPECT_LE(relative_error(x.grad().to(kCPU), xc.grad()), fused_bound(dt)) << dtype_name(dt);
  }
}

// The packed op reads q, k, v in place and writes the (B, T, 3C) gradient itself: the same bits
// as the three views through scaled_dot_product_attention (the same kernels, other layouts).
TEST(CudaAttention, PackedQkvMatchesTheSplitViewsBitForBit) {
  SKIP_WITHOUT_GPU();
  const int64_t B = 2, T = 130, H = 3, D = 64, C = H * D;
  const Tensor qkv = exact_input({B, T, 3 * C}, 9), gy = exact_input({B, T, C}, 10);
  auto split = [&](const Tensor& t, int i) { return t.narrow(2, i * C, C).view({B, T, H, D}).transpose(1, 2); };
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    Tensor x = leaf(qkv.to(dt).to(cuda_device()));
    Tensor y = scaled_dot_product_attention_packed(x, H, {.is_causal = true});
    y.backward(gy.to(dt).to(cuda_device()));
    Tensor x2 = leaf(qkv.to(dt).to(cuda_device()));
    Tensor y2 = scaled_dot_product_attention(split(x2, 0), split(x2, 1), split(x2, 2), {.is_causal = true})
                    .transpose(1, 2)
                    .reshape({B, T, C});
    y2.backward(gy.to(dt).to(cuda_device()));
    EXPECT_EQ(relative_error(y.detach().to(kCPU), y2.detach().to(kCPU)), 0.0) << dtype_name(dt);
    EXPECT_EQ(relative_error(x.grad().to(kCPU), x2.grad().to(kCPU)), 0.0) << dtype_name(dt);
    Tensor xc = leaf(qkv);
    Tensor yc = scaled_dot_product_attention_packed(xc, H, {.is_causal = true});
    yc.backward(gy);
    EXPECT_LE(relative_error(y.detach().to(kCPU), yc.detach()), fused_bound(dt)) << dtype_name(dt);
    EXPECT_LE(relative_error(x.grad().to(kCPU), xc.grad()), fused_bound(dt)) << dtype_name(dt);
  }
}

namespace {

// The body of EveryGradientElementIsWritten under the attention backend in force.
void every_gradient_element_is_written() {
  for (bool causal : {true, false}) {
    for (int64_t T : {65, 200}) {
      const Inputs in = make_inputs(2, 3, T, 64, 40 + static_cast<uint64_t>(T));
      const DType dt = DType::BF16;
      const Tensor q = in.q.to(dt).to(cuda_device()), k = in.k.to(dt).to(cuda_device()),
                   v = in.v.to(dt).to(cuda_device()), gy = in.gy.to(dt).to(cuda_device());
      const kernels::AttentionForwardResult fwd = kernels::attention_forward(q, k, v, causal, 0.125);
      std::set<const void*> poisoned;
      {
        std::vector<Tensor> nan;
        nan.reserve(8);
        for (int i = 0; i < 8; ++i) nan.push_back(full(q.sizes(), NAN, {.dtype = dt, .device = cuda_device()}));
        for (const Tensor& t : nan) poisoned.insert(t.data_ptr());
      }
      const kernels::AttentionGrads g = kernels::attention_backward(gy, q, k, v, fwd.out, fwd.lse, causal, 0.125);
      for (const Tensor* t : {&g.dq, &g.dk, &g.dv})
        ASSERT_TRUE(poisoned.count(t->data_ptr()))
            << "the allocator did not hand a NaN-filled block to a gradient; the check cannot tell written from "
               "unwritten memory";
      const Outputs want = run(in, DType::F32, kCPU, causal, 0.125);
      EXPECT_LE(relative_error(g.dq.to(kCPU), want.dq), fused_bound(dt)) << "dq T=" << T;
      EXPECT_LE(relative_error(g.dk.to(kCPU), want.dk), fused_bound(dt)) << "dk T=" << T;
      EXPECT_LE(relative_error(g.dv.to(kCPU), want.dv), fused_bound(dt)) << "dv T=" << T;
      EXPECT_LE(relative_error(fwd.out.to(kCPU), want.y), fused_bound(dt)) << "out T=" << T;
    }
  }
}

}  // namespace

TEST(CudaAttention, EveryGradientElementIsWritten) {
  SKIP_WITHOUT_GPU();
  // dq, dk and dv land in blocks that held NaN just before (the caching allocator hands blocks of
  // that size back from its cache): an element the kernels never write stays NaN and fails the
  // comparison. Eight such blocks, as the backward may take some for its own scratch first (cuDNN's
  // does), for brisk's kernels and for cuDNN's.
  for (const char* backend : {"brisk", "cudnn"}) {
    brisk::testing::ScopedEnv env("BRISK_CUDA_ATTENTION", backend);
    SCOPED_TRACE(backend);
    every_gradient_element_is_written();
  }
}

TEST(CudaAttention, AComparisonOfAnUnwrittenGradientFails) {
  // What the checks above rely on: NaN (memory never written) is an error, however small the
  // bound, and so is a missing tensor.
  const Tensor want = exact_input({2, 3}, 1);
  Tensor got = want.clone();
  EXPECT_EQ(relative_error(got, want), 0.0);
  got = full({2, 3}, NAN);
  EXPECT_EQ(relative_error(got, want), INFINITY);
  EXPECT_EQ(relative_error(Tensor(), want), INFINITY);
  EXPECT_NONFATAL_FAILURE(expect_outputs_close({got, want, want, want}, {want, want, want, want}, 1.0, "poisoned"),
                          "output relative error inf");
}

TEST(CudaAttention, UnsupportedShapesAndDtypesFallBackAndAgree) {
  SKIP_WITHOUT_GPU();
  struct Case {
    DType dt;
    int64_t D, Tq, Tk;
    bool causal;
  };
  // f64 (no fused kernel), head dims 48 and 16 (not instantiated); Tq != Tk (fused, not causal).
  for (const Case& c : {Case{DType::F64, 64, 65, 65, true}, Case{DType::F64, 128, 200, 200, false},
                        Case{DType::BF16, 48, 65, 65, true}, Case{DType::F16, 16, 100, 100, false},
                        Case{DType::BF16, 64, 70, 130, false}, Case{DType::F32, 128, 130, 70, false}}) {
    const Inputs in{exact_input({2, 2, c.Tq, c.D}, 1), exact_input({2, 2, c.Tk, c.D}, 2),
                    exact_input({2, 2, c.Tk, c.D}, 3), exact_input({2, 2, c.Tq, c.D}, 4)};
    const std::string what = describe(c.dt, c.causal, c.Tq, c.D) + " Tk=" + std::to_string(c.Tk);
    const bool fused = kernels::fused_attention_supported(
        in.q.to(c.dt).to(cuda_device()), in.k.to(c.dt).to(cuda_device()), in.v.to(c.dt).to(cuda_device()), c.causal);
    EXPECT_EQ(fused, c.dt != DType::F64 && (c.D == 64 || c.D == 128)) << what;
    const Outputs want = run(in, DType::F32, kCPU, c.causal);
    expect_outputs_close(run(in, c.dt, cuda_device(), c.causal), want, fused ? fused_bound(c.dt) : blocked_bound(c.dt),
                         what);
  }
}

// ---- recording mode: no GPU needed ----

namespace {

std::vector<cuda::recording::Entry> launches_named(const cuda::recording::Session& rec, const std::string& prefix) {
  std::vector<cuda::recording::Entry> out;
  for (const cuda::recording::Entry& e : rec.entries(cuda::recording::Kind::Launch))
    if (e.name.rfind(prefix, 0) == 0) out.push_back(e);
  return out;
}

// Forward and backward of sdpa on recorded "device" tensors (values meaningless).
void run_recorded(DType dt, int64_t B, int64_t H, int64_t T, int64_t D, bool causal) {
  Tensor q = leaf(empty({B, H, T, D}, dt, cuda_device())), k = leaf(empty({B, H, T, D}, dt, cuda_device()));
  Tensor v = leaf(empty({B, H, T, D}, dt, cuda_device()));
  Tensor y = scaled_dot_product_attention(q, k, v, {.is_causal = causal});
  y.backward(empty(y.sizes(), dt, cuda_device()));
}

}  // namespace

TEST(CudaAttentionRecording, TheFusedKernelsRunForwardAndBackwardWithTheirLaunchShapes) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  FusedAttentionSwitch on(true);
  // GPT-2 124M's attention: B = 16, H = 12, T = 1024, D = 64, bf16, causal.
  run_recorded(DType::BF16, 16, 12, 1024, 64, true);
  const auto fwd = launches_named(rec, "attention_forward");
  const auto kv = launches_named(rec, "attention_backward_kv");
  const auto q = launches_named(rec, "attention_backward_q");
  const auto delta = launches_named(rec, "attention_backward_delta");
  ASSERT_EQ(fwd.size(), 1u);
  ASSERT_EQ(kv.size(), 1u);
  ASSERT_EQ(q.size(), 1u);
  ASSERT_EQ(delta.size(), 1u);
  // Grids (B * H, 64-row tiles), 4 warps; shared memory: forward Q, K (64 x (64 + 8)) and V^T
  // (64 x 72) in bf16; dK/dV K, V, Q, dO and Q^T, dO^T plus 2 x 64 f32; dQ Q, dO, K, V and K^T.
  for (const auto* e : {&fwd[0], &kv[0], &q[0]}) {
    EXPECT_EQ(e->grid[0], 192u) << e->name;
    EXPECT_EQ(e->grid[1], 16u) << e->name;
    EXPECT_EQ(e->block[0], 128u) << e->name;
  }
  EXPECT_EQ(fwd[0].shared_bytes, 3u * 64 * 72 * 2);
  EXPECT_EQ(kv[0].shared_bytes, 6u * 64 * 72 * 2 + 2 * 64 * 4);
  EXPECT_EQ(q[0].shared_bytes, 5u * 64 * 72 * 2);
  EXPECT_EQ(delta[0].grid[0] * delta[0].block[0] / 32, 16u * 12 * 1024) << "a warp per query row";
  EXPECT_TRUE(launches_named(rec, "softmax").empty()) << "no score blocks: no softmax kernel";
  EXPECT_EQ(rec.count(cuda::recording::Kind::Library), 0u) << "no cuBLAS products";

  // D = 128 needs more than the default 48 KiB of shared memory: still under the 227 KiB limit.
  rec.clear();
  run_recorded(DType::F16, 1, 2, 200, 128, false);
  const auto kv128 = launches_named(rec, "attention_backward_kv");
  ASSERT_EQ(kv128.size(), 1u);
  EXPECT_EQ(kv128[0].grid[1], 4u) << "200 keys: 4 tiles, the last one ragged";
  EXPECT_EQ(kv128[0].shared_bytes, 4u * 64 * 136 * 2 + 2u * 128 * 72 * 2 + 2 * 64 * 4);

  // f32: the plain-FMA kernels, the same grids; f32 tiles with rows of D + 2 words.
  rec.clear();
  run_recorded(DType::F32, 2, 3, 130, 64, true);
  const auto f32_fwd = launches_named(rec, "attention_forward");
  const auto f32_kv = launches_named(rec, "attention_backward_kv");
  const auto f32_q = launches_named(rec, "attention_backward_q");
  ASSERT_EQ(f32_fwd.size(), 1u);
  ASSERT_EQ(f32_kv.size(), 1u);
  ASSERT_EQ(f32_q.size(), 1u);
  EXPECT_EQ(f32_fwd[0].grid[0], 6u);
  EXPECT_EQ(f32_fwd[0].grid[1], 3u);
  EXPECT_EQ(f32_fwd[0].shared_bytes, 2u * 64 * 66 * 4);
  EXPECT_EQ(f32_kv[0].shared_bytes, 4u * 64 * 66 * 4 + 2 * 64 * 4);
  EXPECT_EQ(f32_q[0].shared_bytes, 2u * 64 * 66 * 4);
  EXPECT_TRUE(launches_named(rec, "softmax").empty());
}

// GPT-2 124M's block through the packed op: the kernels read q, k and v inside the projection
// and write the output and the (B, T, 3C) gradient in the layouts the neighbouring ops use, so
// forward and backward launch the four attention kernels and nothing else (no copy, no cat).
TEST(CudaAttentionRecording, ThePackedOpCopiesNothing) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  FusedAttentionSwitch on(true);
  const int64_t B = 16, T = 1024, H = 12, C = 768;
  Tensor x = leaf(empty({B, T, 3 * C}, DType::BF16, cuda_device()));
  Tensor gy = empty({B, T, C}, DType::BF16, cuda_device());
  rec.clear();
  Tensor y = scaled_dot_product_attention_packed(x, H, {.is_causal = true});
  EXPECT_EQ(y.sizes(), Shape({B, T, C}));
  EXPECT_TRUE(y.is_contiguous());
  y.backward(gy);
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  std::vector<std::string> names;
  for (const auto& e : rec.entries(cuda::recording::Kind::Launch)) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"attention_forward", "attention_backward_delta", "attention_backward_kv",
                                             "attention_backward_q"}));
  EXPECT_EQ(rec.count(cuda::recording::Kind::Copy), 0u);
}

TEST(CudaAttentionRecording, TheSwitchAndUnsupportedInputsTakeTheBlockedPath) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  {
    FusedAttentionSwitch off(false);
    run_recorded(DType::BF16, 2, 3, 130, 64, true);
    EXPECT_TRUE(launches_named(rec, "attention_").empty()) << "BRISK_CUDA_ATTENTION=math";
    EXPECT_FALSE(launches_named(rec, "softmax").empty()) << "the blocked path's softmax";
  }
  FusedAttentionSwitch on(true);
  for (auto [dt, D] : {std::pair{DType::F64, int64_t{64}}, std::pair{DType::BF16, int64_t{48}}}) {
    rec.clear();
    run_recorded(dt, 2, 3, 130, D, true);
    EXPECT_TRUE(launches_named(rec, "attention_").empty()) << dtype_name(dt) << " D=" << D;
    EXPECT_FALSE(launches_named(rec, "softmax").empty()) << dtype_name(dt) << " D=" << D;
  }
  std::string why;
  EXPECT_FALSE(kernels::fused_attention_supported(empty({2, 3, 130, 48}, DType::BF16, cuda_device()),
                                                  empty({2, 3, 130, 48}, DType::BF16, cuda_device()),
                                                  empty({2, 3, 130, 48}, DType::BF16, cuda_device()), true, &why));
  EXPECT_NE(why.find("head dim 48"), std::string::npos) << why;
  EXPECT_THROW(kernels::attention_forward(empty({2, 3, 130, 48}, DType::BF16, cuda_device()),
                                          empty({2, 3, 130, 48}, DType::BF16, cuda_device()),
                                          empty({2, 3, 130, 48}, DType::BF16, cuda_device()), true, 0.1),
               Error);
  EXPECT_FALSE(kernels::fused_attention_supported(empty({2, 3, 130, 64}, DType::BF16, kCPU),
                                                  empty({2, 3, 130, 64}, DType::BF16, kCPU),
                                                  empty({2, 3, 130, 64}, DType::BF16, kCPU), false));
}
