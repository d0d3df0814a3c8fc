// add_layer_norm on CUDA. With a GPU: the fused kernels against the CPU (h bit for bit: the same
// rounding of the add; y, mean, rstd and the gradients within the dtype's rounding) and against
// the unfused path on the GPU (BRISK_CUDA_FUSED_RESIDUAL_LN=0: bit for bit, the same layer-norm
// plan and sums), f32, f16 and bf16, rows of 1 to 40,000 values (held in registers, streamed when
// not a multiple of the vector, held over a cluster or in shared memory when long). In recording
// mode (no GPU needed): which kernels run for each dtype, and that the switch turns them off.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/nn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/errors.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using brisk::testing::relative_error;

namespace {

// Sets BRISK_CUDA_FUSED_RESIDUAL_LN for a scope (the op reads it at each call).
class FusedSwitch : public brisk::testing::ScopedEnv {
 public:
  explicit FusedSwitch(bool on) : ScopedEnv("BRISK_CUDA_FUSED_RESIDUAL_LN", on ? "1" : "0") {}
};

Tensor rnd(const Shape& s, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Generator gen(seed);
  return randn(s, {}, &gen) * scale + shift;
}

struct LayerNormOutputs {
  Tensor h, y, mean, rstd, dx, dw, db;  // on the CPU
};

// The op and its backward on `dev` in `dt` (inputs made in f32 on the CPU, then converted).
LayerNormOutputs run(DType dt, Device dev, int64_t R, int64_t D) {
  auto in = [&](const Tensor& t) { return t.to(dt).to(dev); };
  const Tensor x = in(rnd({R, D}, 1, 1.0, 2.0)), r = in(rnd({R, D}, 2, 0.5)), w = in(rnd({D}, 3)), b = in(rnd({D}, 4));
  const Tensor gy = in(rnd({R, D}, 5)), gh = in(rnd({R, D}, 6, 0.5));
  kernels::AddLayerNormResult f = kernels::add_layer_norm(x, r, {D}, w, b, 1e-5);
  kernels::LayerNormGrads g = kernels::add_layer_norm_backward(gy, gh, f.h, f.mean, f.rstd, w, {true, true, true});
  return {f.h.to(kCPU),  f.y.to(kCPU),       f.mean.to(kCPU), f.rstd.to(kCPU),
          g.dx.to(kCPU), g.dweight.to(kCPU), g.dbias.to(kCPU)};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}

const char* kNames[] = {"h", "y", "mean", "rstd", "dx", "dweight", "dbias"};
std::vector<const Tensor*> fields(const LayerNormOutputs& o) {
  return {&o.h, &o.y, &o.mean, &o.rstd, &o.dx, &o.dw, &o.db};
}

}  // namespace

TEST(CudaAddLayerNorm, FusedMatchesTheCpuAndTheUnfusedPath) {
  SKIP_WITHOUT_GPU();
  struct Shape2 {
    int64_t R, D;
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    // Column sums of bf16/f16 gradients over many rows round more: a wider bound for them.
    const double bound = dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 4e-3 : 2e-5;
    for (Shape2 s : {Shape2{5, 1}, Shape2{7, 3}, Shape2{9, 7}, Shape2{33, 33}, Shape2{64, 768}, Shape2{3, 1000},
                     Shape2{4, 1001}, Shape2{3, 40000}}) {
      const std::string what = std::string(dtype_name(dt)) + " R=" + std::to_string(s.R) + " D=" + std::to_string(s.D);
      const LayerNormOutputs cpu = run(dt, kCPU, s.R, s.D);
      LayerNormOutputs fused, unfused;
      {
        FusedSwitch on(true);
        fused = run(dt, cuda_device(), s.R, s.D);
      }
      {
        FusedSwitch off(false);
        unfused = run(dt, cuda_device(), s.R, s.D);
      }
      const auto f = fields(fused), u = fields(unfused), c = fields(cpu);
      EXPECT_TRUE(same_bits(*f[0], *c[0])) << what << ": h is the add's rounding on both";
      for (size_t i = 0; i < f.size(); ++i) {
        EXPECT_TRUE(same_bits(*f[i], *u[i])) << what << ": " << kNames[i] << " fused vs unfused on the GPU";
        const double e = relative_error(*f[i], *c[i]);
        EXPECT_LE(e, bound) << what << ": " << kNames[i] << " relative error " << e << " against the CPU";
      }
    }
  }
}

TEST(CudaAddLayerNorm, AutogradOpRunsOnTheGpu) {
  SKIP_WITHOUT_GPU();
  Tensor x = rnd({4, 64}, 1).to(cuda_device()), r = rnd({4, 64}, 2).to(cuda_device());
  x.requires_grad_(true);
  r.requires_grad_(true);
  AddLayerNormOutput o = add_layer_norm(x, r, {64});
  sum(o.y * o.y + o.h).backward();
  Tensor xc = rnd({4, 64}, 1), rc = rnd({4, 64}, 2);
  xc.requires_grad_(true);
  rc.requires_grad_(true);
  AddLayerNormOutput oc = add_layer_norm(xc, rc, {64});
  sum(oc.y * oc.y + oc.h).backward();
  EXPECT_LE(relative_error(x.grad().to(kCPU), xc.grad()), 1e-5);
  EXPECT_LE(relative_error(r.grad().to(kCPU), rc.grad()), 1e-5);
}

// ---- recording mode: no GPU needed ----

namespace {

size_t launches(const cuda::recording::Session& rec, const std::string& name) {
  size_t n = 0;
  for (const cuda::recording::Entry& e : rec.entries(cuda::recording::Kind::Launch)) n += e.name == name;
  return n;
}

void run_recorded(DType dt, int64_t R, int64_t D) {
  const Tensor x = empty({R, D}, dt, cuda_device()), r = empty({R, D}, dt, cuda_device());
  const Tensor w = empty({D}, dt, cuda_device()), b = empty({D}, dt, cuda_device());
  kernels::AddLayerNormResult f = kernels::add_layer_norm(x, r, {D}, w, b, 1e-5);
  kernels::add_layer_norm_backward(empty({R, D}, dt, cuda_device()), empty({R, D}, dt, cuda_device()), f.h, f.mean,
                                   f.rstd, w, {true, true, true});
}

}  // namespace

TEST(CudaAddLayerNormRecording, TheFusedKernelsRunForEachDtypeAndTheSwitchTurnsThemOff) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  // GPT-2's width (rows held in registers), a width that is no multiple of the vector (streamed),
  // and long rows (a cluster of blocks on Hopper).
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t D : {int64_t{768}, int64_t{1001}, int64_t{40000}}) {
      const std::string what = std::string(dtype_name(dt)) + " D=" + std::to_string(D);
      // Rows up to 16,384 values (4,096 unaligned, as 1001 is): dx and the weight sums in one pass (then the chunks'
      // finish); longer ones: the dx kernel, the column sums and their serial finish.
      const bool one_pass = D <= 16384;
      rec.clear();
      {
        FusedSwitch on(true);
        run_recorded(dt, 6, D);
      }
      EXPECT_EQ(launches(rec, "add_layer_norm"), 1u) << what;
      EXPECT_EQ(launches(rec, "add_layer_norm_dx_sums"), one_pass ? 1u : 0u) << what;
      EXPECT_EQ(launches(rec, "layer_norm_sums_finish"), one_pass ? 1u : 0u) << what;
      EXPECT_EQ(launches(rec, "add_layer_norm_dx"), one_pass ? 0u : 1u) << what;
      EXPECT_EQ(launches(rec, "add"), 0u) << what << ": no separate add";
      EXPECT_EQ(launches(rec, "layer_norm"), 0u) << what;
      EXPECT_EQ(launches(rec, "layer_norm_dx"), 0u) << what;
      EXPECT_EQ(launches(rec, "layer_norm_dx_sums"), 0u) << what;
      EXPECT_EQ(launches(rec, "layer_norm_columns"), one_pass ? 0u : 1u) << what << ": the weight and bias sums";
      EXPECT_EQ(launches(rec, "layer_norm_columns_finish"), one_pass ? 0u : 1u) << what;
      rec.clear();
      {
        FusedSwitch off(false);
        run_recorded(dt, 6, D);
      }
      EXPECT_EQ(launches(rec, "add_layer_norm"), 0u) << what << ": BRISK_CUDA_FUSED_RESIDUAL_LN=0";
      EXPECT_EQ(launches(rec, "add_layer_norm_dx"), 0u) << what;
      EXPECT_EQ(launches(rec, "add"), 2u) << what << ": h, then dx + grad_h";
      EXPECT_EQ(launches(rec, "layer_norm"), 1u) << what;
      EXPECT_EQ(launches(rec, one_pass ? "layer_norm_dx_sums" : "layer_norm_dx"), 1u) << what;
    }
  }
  // Through autograd (GPT-2's use): one fused launch forward, one backward.
  rec.clear();
  Tensor x = empty({8, 768}, DType::BF16, cuda_device()), r = empty({8, 768}, DType::BF16, cuda_device());
  x.requires_grad_(true);
  r.requires_grad_(true);
  AddLayerNormOutput o = add_layer_norm(x, r, {768});
  EXPECT_EQ(launches(rec, "add_layer_norm"), 1u);
  o.y.backward(empty({8, 768}, DType::BF16, cuda_device()));
  EXPECT_EQ(launches(rec, "add_layer_norm_dx"), 1u);
  EXPECT_EQ(launches(rec, "layer_norm"), 0u);
}

TEST(CudaAddLayerNormRecording, DeviceMismatchNamesTheOpAndShapes) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  brisk::testing::expect_error(
      [] {
        kernels::add_layer_norm(zeros({2, 3, 8}), empty({2, 3, 8}, DType::F32, cuda_device()), {8}, Tensor(), Tensor(),
                                1e-5);
      },
      "add_layer_norm: input [2, 3, 8] is on cpu and residual [2, 3, 8] on cuda:0");
}
