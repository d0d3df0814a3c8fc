// layer_norm_backward on CUDA: the one-pass kernel (dx and the weight sums from one read of grad
// and x, then the chunks' finish) against the split kernels it replaces
// (BRISK_CUDA_FUSED_LN_BACKWARD=0) and the CPU, and run after run bit for bit (with a GPU). In
// recording mode (no GPU needed): two launches per backward instead of three, and no cudaMalloc
// per call once the caching allocator is warm.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/nn.h>

#include <cstring>
#include <string>

#include "common/compare.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using brisk::testing::relative_error;

namespace layer_norm_backward_test {

class OnePass : public brisk::testing::ScopedEnv {
 public:
  explicit OnePass(bool on) : ScopedEnv("BRISK_CUDA_FUSED_LN_BACKWARD", on ? "1" : "0") {}
};

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}

size_t launches(const cuda::recording::Session& rec, const std::string& name) {
  size_t n = 0;
  for (const cuda::recording::Entry& e : rec.entries(cuda::recording::Kind::Launch)) n += e.name == name;
  return n;
}

}  // namespace layer_norm_backward_test

namespace lnb = layer_norm_backward_test;

TEST(CudaLayerNormBackward, OnePassMatchesTheSplitKernelsAndTheCpuAndRepeatsBitForBit) {
  SKIP_WITHOUT_GPU();
  struct Shape2 {
    int64_t R, D;
  };
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const double bound = dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 4e-3 : 2e-5;
    // GPT-2's width over many chunks, rows not read as vectors, 2 to 16 warps per row, and rows
    // past the registers (the split kernels either way).
    for (Shape2 s : {Shape2{4099, 768}, Shape2{300, 1001}, Shape2{65, 2048}, Shape2{9, 16384}, Shape2{3, 40000}}) {
      const std::string what = std::string(dtype_name(dt)) + " R=" + std::to_string(s.R) + " D=" + std::to_string(s.D);
      Generator gen(static_cast<uint64_t>(s.R + s.D));
      const Tensor x = randn({s.R, s.D}, {}, &gen) * 2.0 + 1.0, g = randn({s.R, s.D}, {}, &gen);
      const Tensor w = randn({s.D}, {}, &gen), b = randn({s.D}, {}, &gen);
      auto run = [&](Device dev) {
        auto in = [&](const Tensor& t) { return t.to(dt).to(dev); };
        const Tensor xd = in(x), wd = in(w);
        const kernels::LayerNormResult f = kernels::layer_norm(xd, {s.D}, wd, in(b), 1e-5);
        const kernels::LayerNormGrads r =
            kernels::layer_norm_backward(in(g), xd, f.mean, f.rstd, wd, {true, true, true});
        return kernels::LayerNormGrads{r.dx.to(kCPU), r.dweight.to(kCPU), r.dbias.to(kCPU)};
      };
      const kernels::LayerNormGrads cpu = run(kCPU);
      kernels::LayerNormGrads one, again, split;
      {
        lnb::OnePass on(true);
        one = run(cuda_device());
        again = run(cuda_device());
      }
      {
        lnb::OnePass off(false);
        split = run(cuda_device());
      }
      EXPECT_TRUE(lnb::same_bits(one.dx, again.dx) && lnb::same_bits(one.dweight, again.dweight) &&
                  lnb::same_bits(one.dbias, again.dbias))
          << what << ": two runs, the same bits";
      const char* names[] = {"dx", "dweight", "dbias"};
      const Tensor* o[] = {&one.dx, &one.dweight, &one.dbias};
      const Tensor* sp[] = {&split.dx, &split.dweight, &split.dbias};
      const Tensor* c[] = {&cpu.dx, &cpu.dweight, &cpu.dbias};
      for (int i = 0; i < 3; ++i) {
        EXPECT_LE(relative_error(*o[i], *c[i]), bound) << what << ": " << names[i] << " one pass vs the CPU";
        EXPECT_LE(relative_error(*sp[i], *c[i]), bound) << what << ": " << names[i] << " split vs the CPU";
      }
    }
  }
}

TEST(CudaLayerNormBackwardRecording, TwoLaunchesInsteadOfThreeAndNoAllocationAfterWarmUp) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  for (DType dt : {DType::F32, DType::BF16}) {
    const std::string what = dtype_name(dt);
    // GPT-2 124M's shape (16 x 1024 rows of 768): the recording allocates host memory for it.
    const int64_t R = 16 * 1024, D = 768;
    const Tensor x = empty({R, D}, dt, cuda_device()), g = empty({R, D}, dt, cuda_device());
    const Tensor w = empty({D}, dt, cuda_device()), mean = empty({R}, DType::F32, cuda_device()),
                 rstd = empty({R}, DType::F32, cuda_device());
    auto backward = [&] { (void)kernels::layer_norm_backward(g, x, mean, rstd, w, {true, true, true}); };
    rec.clear();
    {
      lnb::OnePass off(false);
      backward();
    }
    EXPECT_EQ(rec.count(cuda::recording::Kind::Launch), 3u) << what << ": dx, column sums, finish";
    EXPECT_EQ(lnb::launches(rec, "layer_norm_dx"), 1u) << what;
    EXPECT_EQ(lnb::launches(rec, "layer_norm_columns"), 1u) << what;
    EXPECT_EQ(lnb::launches(rec, "layer_norm_columns_finish"), 1u) << what;
    backward();  // warm-up of the one-pass path (its partials)
    const int64_t allocs = cuda::allocator_stats(0).device_allocs;
    rec.clear();
    for (int i = 0; i < 5; ++i) backward();
    EXPECT_EQ(rec.count(cuda::recording::Kind::Launch), 10u) << what << ": two launches per backward";
    EXPECT_EQ(lnb::launches(rec, "layer_norm_dx_sums"), 5u) << what;
    EXPECT_EQ(lnb::launches(rec, "layer_norm_sums_finish"), 5u) << what;
    EXPECT_EQ(lnb::launches(rec, "layer_norm_columns"), 0u) << what;
    EXPECT_EQ(rec.count(cuda::recording::Kind::Malloc), 0u) << what << ": no cudaMalloc after warm-up";
    EXPECT_EQ(cuda::allocator_stats(0).device_allocs, allocs) << what;
    for (const cuda::recording::Entry& e : rec.entries(cuda::recording::Kind::Launch)) {
      if (e.name != "layer_norm_dx_sums") continue;
      EXPECT_EQ(e.grid[0], 256u) << what << ": one block per chunk of 64 rows";
      EXPECT_EQ(e.block[0] * e.block[1], 256u) << what << ": a warp per row, 8 rows per block";
    }
  }
}
