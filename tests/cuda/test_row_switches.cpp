// The row kernels' timing switches change no value (with a GPU): softmax and layer norm over rows
// held in registers (768) and over a cluster of blocks on Hopper (50,304) give the same bits with
// the cluster's split barrier on or off (BRISK_CUDA_ROW_SPLIT_BARRIER) and layer norm's weight and
// bias read as vectors or element by element (BRISK_CUDA_LN_VECTOR_AFFINE), and agree with the CPU.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cstring>
#include <string>

#include "common/compare.h"
#include "cuda/gpu_skip.h"

using namespace brisk;

namespace row_switches_test {

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}

}  // namespace row_switches_test

TEST(CudaRowKernels, SoftmaxAndLayerNormGiveTheSameBitsWithEverySwitch) {
  SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  for (DType dt : {DType::F32, DType::BF16}) {
    const double bound = dt == DType::BF16 ? 1e-2 : 1e-5;
    for (int64_t D : {int64_t{768}, int64_t{50304}}) {
      const std::string what = std::string(dtype_name(dt)) + " D=" + std::to_string(D);
      Generator gen(static_cast<uint64_t>(D));
      const Tensor x = randn({5, D}, {}, &gen) * 3.0, w = randn({D}, {}, &gen), b = randn({D}, {}, &gen);
      const Tensor xd = x.to(dt).to(cuda_device()), wd = w.to(dt).to(cuda_device()), bd = b.to(dt).to(cuda_device());
      Tensor sm[2][2], ln[2][2];
      for (int split = 0; split < 2; ++split) {
        for (int vec = 0; vec < 2; ++vec) {
          brisk::testing::ScopedEnv s("BRISK_CUDA_ROW_SPLIT_BARRIER", split ? "1" : "0");
          brisk::testing::ScopedEnv v("BRISK_CUDA_LN_VECTOR_AFFINE", vec ? "1" : "0");
          sm[split][vec] = softmax(xd, 1).to(kCPU);
          ln[split][vec] = layer_norm(xd, {D}, wd, bd).to(kCPU);
        }
      }
      for (int split = 0; split < 2; ++split) {
        for (int vec = 0; vec < 2; ++vec) {
          EXPECT_TRUE(row_switches_test::same_bits(sm[split][vec], sm[1][1])) << what << ": softmax " << split << vec;
          EXPECT_TRUE(row_switches_test::same_bits(ln[split][vec], ln[1][1]))
              << what << ": layer_norm " << split << vec;
        }
      }
      const Tensor xc = x.to(dt), wc = w.to(dt), bc = b.to(dt);
      EXPECT_LE(brisk::testing::relative_error(sm[1][1], softmax(xc, 1)), bound) << what << ": softmax vs the CPU";
      EXPECT_LE(brisk::testing::relative_error(ln[1][1], layer_norm(xc, {D}, wc, bc)), bound)
          << what << ": layer_norm vs the CPU";
    }
  }
}
