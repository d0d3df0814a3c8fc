// Fused optimizer steps and gradient norms in GB/s over a transformer-like parameter list (many
// tensors of mixed sizes): AdamW (p, g, m, v read; p, m, v written) and the total gradient norm
// with clipping, on the CPU (1 and 2 threads) and, when a GPU is present, on the GPU (timed to
// completion: each iteration ends with a device synchronisation). BM_AdamWOptimizerStep times the
// whole optim::AdamW::step() on the same list (state look-up and grouping included, not only the
// fused kernel): run it on two builds to compare optimizer-side overhead before/after a change.
#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/optim.h>

#include "bench_common.h"

using namespace brisk;

namespace {

// Per layer: 4 d x d matrices, two 4d x d MLP matrices, and 6 small vectors (biases, norms).
std::vector<Tensor> model_like(int64_t layers, int64_t d, DType dt, Device dev) {
  std::vector<Tensor> ps;
  for (int64_t l = 0; l < layers; ++l) {
    for (int k = 0; k < 4; ++k) ps.push_back(randn({d, d}, {.dtype = dt}).to(dev));
    ps.push_back(randn({4 * d, d}, {.dtype = dt}).to(dev));
    ps.push_back(randn({d, 4 * d}, {.dtype = dt}).to(dev));
    for (int k = 0; k < 6; ++k) ps.push_back(randn({d}, {.dtype = dt}).to(dev));
  }
  return ps;
}

int64_t elements(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel();
  return n;
}

bool device_ok(benchmark::State& state, Device dev) {
  if (dev.is_cuda() && !cuda::is_available()) {
    state.SkipWithError("no CUDA device");
    return false;
  }
  return true;
}

void BM_AdamW(benchmark::State& state) {
  const Device dev = state.range(1) ? cuda_device(0) : kCPU;
  if (!device_ok(state, dev)) return;
  bench::ThreadScope threads(static_cast<int>(state.range(2)));
  const DType dt = DType::F32;
  auto p = model_like(state.range(0), 256, dt, dev), g = model_like(state.range(0), 256, dt, dev);
  auto m = model_like(state.range(0), 256, dt, dev), v = model_like(state.range(0), 256, dt, kCPU);
  for (Tensor& t : v) t = kernels::unary(kernels::UnaryOp::Abs, t).to(dev);  // second moments are >= 0
  int64_t step = 0;
  for (auto _ : state) {
    kernels::adam_step(p, g, m, v, {}, {1e-4, 0.9, 0.999, 1e-8, 0.01, true, false, false, ++step});
    if (dev.is_cuda()) cuda::synchronize();
  }
  state.SetBytesProcessed(state.iterations() * elements(p) * 7 * 4);
  state.counters["tensors"] = static_cast<double>(p.size());
}

void BM_ClipGradNorm(benchmark::State& state) {
  const Device dev = state.range(1) ? cuda_device(0) : kCPU;
  if (!device_ok(state, dev)) return;
  bench::ThreadScope threads(static_cast<int>(state.range(2)));
  auto g = model_like(state.range(0), 256, DType::F32, dev);
  for (auto _ : state) {
    Tensor norm = kernels::total_norm(g, 2.0);
    kernels::clip_grads_with_norm_(g, 1e9, norm);   // reads the norm on the device; never scales
    benchmark::DoNotOptimize(norm.item<double>());  // the one host read
  }
  state.SetBytesProcessed(state.iterations() * elements(g) * 4 * 2);
}

void BM_AdamWOptimizerStep(benchmark::State& state) {
  const Device dev = state.range(1) ? cuda_device(0) : kCPU;
  if (!device_ok(state, dev)) return;
  bench::ThreadScope threads(static_cast<int>(state.range(2)));
  auto p = model_like(state.range(0), 256, DType::F32, dev), g = model_like(state.range(0), 256, DType::F32, dev);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i].requires_grad_();
    p[i].set_grad(g[i]);
  }
  optim::AdamW opt(p, {.lr = 1e-4, .weight_decay = 0.01});
  opt.step();  // the state is made on the first step
  if (dev.is_cuda()) cuda::synchronize();
  for (auto _ : state) {
    opt.step();
    if (dev.is_cuda()) cuda::synchronize();
  }
  state.SetBytesProcessed(state.iterations() * elements(p) * 7 * 4);
  state.counters["tensors"] = static_cast<double>(p.size());
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t layers : {2, 12}) {
    for (int t : {1, 2}) b->Args({layers, 0, t});
    b->Args({layers, 1, 1});
  }
  b->ArgNames({"layers", "gpu", "threads"})->UseRealTime();
}

}  // namespace

BENCHMARK(BM_AdamW)->Apply(sizes);
BENCHMARK(BM_ClipGradNorm)->Apply(sizes);
BENCHMARK(BM_AdamWOptimizerStep)->Apply(sizes);
BENCHMARK_MAIN();
