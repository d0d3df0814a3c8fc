// The residual add fused with layer norm (kernels::add_layer_norm and its backward) against the
// add and layer norm it replaces (binary add, layer_norm; layer_norm_backward, then the add of h's
// gradient), forward + backward, at GPT-2 124M's shape: 16 x 1024 rows of 768, bf16 and f32. On
// the GPU (timed to completion: each iteration ends with a device synchronisation; skipped
// without one) the unfused side is what BRISK_CUDA_FUSED_RESIDUAL_LN=0 runs; on the CPU (1 and
// 2 threads, 1024 rows) the same comparison. Bytes: what each side must move at least, counted
// for the fused one (x, residual, h, y forward; grad_y, grad_h, h, dx, and grad_y, h again for the
// weight sums backward), so both report time against the same work.
#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/nn.h>

#include "bench_common.h"

using namespace brisk;

namespace {

constexpr int64_t kWidth = 768;

template <bool kFused>
void BM_AddLayerNormFwdBwd(benchmark::State& state) {
  const bool gpu = state.range(1) != 0;
  if (gpu && !cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const Device dev = gpu ? cuda_device(0) : kCPU;
  const DType dt = state.range(0) ? DType::BF16 : DType::F32;
  bench::ThreadScope threads(static_cast<int>(state.range(2)));
  const int64_t rows = gpu ? 16 * 1024 : 1024;
  auto make = [&](const Shape& s) { return randn(s, {.dtype = dt}).to(dev); };
  const Tensor x = make({rows, kWidth}), r = make({rows, kWidth}), w = make({kWidth}), b = make({kWidth});
  const Tensor gy = make({rows, kWidth}), gh = make({rows, kWidth});
  for (auto _ : state) {
    kernels::LayerNormGrads g;
    if constexpr (kFused) {
      kernels::AddLayerNormResult f = kernels::add_layer_norm(x, r, {kWidth}, w, b, 1e-5);
      g = kernels::add_layer_norm_backward(gy, gh, f.h, f.mean, f.rstd, w, {true, true, true});
    } else {
      const Tensor h = kernels::binary(kernels::BinaryOp::Add, x, r);
      kernels::LayerNormResult f = kernels::layer_norm(h, {kWidth}, w, b, 1e-5);
      g = kernels::layer_norm_backward(gy, h, f.mean, f.rstd, w, {true, true, true});
      g.dx = kernels::binary(kernels::BinaryOp::Add, g.dx, gh);
    }
    if (gpu) cuda::synchronize();
    benchmark::DoNotOptimize(g.dx.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * rows * kWidth * static_cast<int64_t>(dtype_size(dt)) * 10);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int bf16 : {0, 1}) {
    b->Args({bf16, 1, 1});
    for (int t : {1, 2}) b->Args({bf16, 0, t});
  }
  b->ArgNames({"bf16", "gpu", "threads"})->UseRealTime();
}

}  // namespace

BENCHMARK(BM_AddLayerNormFwdBwd<true>)->Apply(shapes);
BENCHMARK(BM_AddLayerNormFwdBwd<false>)->Apply(shapes);
BENCHMARK_MAIN();
