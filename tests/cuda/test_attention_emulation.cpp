// The fused attention kernels' own code (kernels/cuda/attention_kernels.cuh) run on the host
// through tests/cuda/attention_emulation.h (threads for a block's threads, barriers, exchanges
// for shuffles, mma.sync from the PTX fragment layouts), no GPU needed: the fragment helpers and
// the emulated mma against a matmul, then forward (output and logsumexp) and backward (dq, dk,
// dv) against the CPU's scaled_dot_product_attention for a few cases that between them take
// every kernel and dtype, causal and not, ragged tiles, strides, B * H > 1 and Tq != Tk, with the
// outputs in the (B, T, H, D) memory the library allocates (each
// emulated block is 128 host threads: tests/cuda_slow has the sweep). What this cannot check:
// the fragment layouts themselves, timing, and the launches (tests/cuda/test_attention.cpp does,
// on a GPU and in recording mode).
#include "cuda/attention_emulation_cases.h"

using namespace brisk;
using namespace brisk::testing::attention_emulation;
using brisk::testing::relative_error;

TEST(AttentionEmulation, KernelsMatchTheCpuOnAFewCases) {
  run_case({DType::BF16, 2, 1, 65, 65, 32, true, true});   // causal, ragged, strided, two heads
  run_case({DType::F16, 1, 1, 70, 20, 64, false, false});  // Tq != Tk
  run_case({DType::BF16, 1, 1, 1, 1, 128, true, false});   // one row, the widest head
  run_case({DType::F32, 1, 1, 65, 65, 80, true, true});    // the f32 kernels
  run_case({DType::F32, 1, 2, 20, 70, 64, false, false});
  // Batches and heads both > 1: the outputs' (B, T, H, D) memory differs from (B, H, T, D).
  run_case({DType::BF16, 2, 3, 17, 17, 32, true, false});
}

namespace {

struct MmaArgs {
  const uint16_t* a;  // 16 x 16 row-major
  const uint16_t* b;  // B^T: 8 x 16 row-major (b[n][k])
  float* c;           // 16 x 8 row-major
};

// One warp: C = A B through load_a, load_b and mma, written back by the C layout.
void mma_probe_kernel(const MmaArgs p) {
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  uint32_t a[4], b[2];
  ad::load_a(a, p.a, 16, 0, 0, lane);
  ad::load_b(b, p.b, 16, 0, 0, lane);
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  ad::mma<BFloat16>(c, a, b);
  p.c[g * 8 + t2] = c[0];
  p.c[g * 8 + t2 + 1] = c[1];
  p.c[(g + 8) * 8 + t2] = c[2];
  p.c[(g + 8) * 8 + t2 + 1] = c[3];
}

}  // namespace

TEST(AttentionEmulation, FragmentHelpersAndMmaMultiply) {
  const Tensor a = exact_input({16, 16}, 11), bt = exact_input({8, 16}, 12);
  const Tensor a16 = a.to(DType::BF16).contiguous(), b16 = bt.to(DType::BF16).contiguous();
  Tensor c = full({16, 8}, NAN, {.dtype = DType::F32});
  emu::run_grid(mma_probe_kernel, dim3{1}, dim3{32}, 0,
                MmaArgs{static_cast<const uint16_t*>(a16.data_ptr()), static_cast<const uint16_t*>(b16.data_ptr()),
                        static_cast<float*>(c.data_ptr())});
  EXPECT_LE(relative_error(c, matmul(a, bt.transpose(0, 1))), 1e-6);
}
