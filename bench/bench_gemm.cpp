// GEMM in GFLOP/s: brisk::matmul against Eigen's own GEMM called directly (the reference),
// square sizes 64..1024 on 1 and 2 threads. brisk should stay within 10% of Eigen at >= 512.
// BM_BriskLayerGemm: the products of the example CNN's first linear layer (batch 64, 1568 -> 256)
// and of a small GPT's layers (8 x 256 tokens, width 384), forward and both gradients, through
// each CPU GEMM library (OpenBLAS when built in, Eigen). BM_OpenBlasOneCall: the same products
// as one single-threaded OpenBLAS call with no panels, so brisk's panels (the price of results
// that do not depend on the thread count) and its per-call overhead show as the difference.
// BM_BriskLayerGemmBf16: the same products on bf16 tensors, with the CPU's bf16 dot-product
// instructions (dot1, where the CPU has AVX512_BF16) or converted to f32 (dot0).
#include <brisk/brisk.h>

#include <brisk/kernels/linalg.h>

#include <Eigen/Core>
#include <iterator>
#if BRISK_BENCH_OPENBLAS
#include <cblas.h>
#endif

#include "bench_common.h"

using namespace brisk;

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void BM_BriskMatmul(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b).data_ptr());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_EigenGemm(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  Eigen::setNbThreads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  RowMajor a = RowMajor::Random(n, n), b = RowMajor::Random(n, n);
  for (auto _ : state) {
    RowMajor c(n, n);  // a fresh output each time, as matmul allocates one
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  Eigen::setNbThreads(0);  // back to following OpenMP, which brisk's own cases set
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_BriskMatmulTransposedB(benchmark::State& state) {  // x @ W^T, the linear layer's layout
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({n, n}), w = randn({n, n});
  Tensor wt = w.t();
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, wt).data_ptr());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

// (M, N, K, trans_a, trans_b) of C = op(A) op(B).
struct LayerGemm {
  int64_t m, n, k;
  bool ta, tb;
};
const LayerGemm kLayerGemms[] = {
    {64, 256, 1568, false, true},    // CNN fc1 forward: x W^T
    {64, 1568, 256, false, false},   // CNN fc1 input gradient: gy W
    {256, 1568, 64, true, false},    // CNN fc1 weight gradient: gy^T x
    {2048, 1152, 384, false, true},  // GPT qkv projection forward
    {2048, 384, 1536, false, true},  // GPT MLP down projection forward
    {1536, 384, 2048, true, false},  // GPT MLP weight-gradient shape: a^T b
};

void BM_BriskLayerGemm(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const auto library = state.range(2) == 0 ? kernels::CpuGemm::OpenBLAS : kernels::CpuGemm::Eigen;
  if (!kernels::cpu_gemm_available(library)) {
    state.SkipWithError("OpenBLAS is not built in");
    return;
  }
  const kernels::CpuGemm saved = kernels::cpu_gemm();
  kernels::set_cpu_gemm(library);
  const LayerGemm& g = kLayerGemms[state.range(0)];
  Tensor a = randn(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}), b = randn(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n});
  Tensor opa = g.ta ? a.t() : a, opb = g.tb ? b.t() : b;
  for (auto _ : state) benchmark::DoNotOptimize(matmul(opa, opb).data_ptr());
  kernels::set_cpu_gemm(saved);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * g.m * g.n * g.k, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_BriskLayerGemmBf16(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const bool dot = state.range(2) == 1;
  if (dot && !kernels::cpu_bf16_dot_available()) {
    state.SkipWithError("this CPU has no AVX512_BF16");
    return;
  }
  const bool saved = kernels::cpu_bf16_dot();
  kernels::set_cpu_bf16_dot(dot);
  const LayerGemm& g = kLayerGemms[state.range(0)];
  Tensor a = randn(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, {.dtype = DType::BF16});
  Tensor b = randn(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, {.dtype = DType::BF16});
  Tensor opa = g.ta ? a.t() : a, opb = g.tb ? b.t() : b;
  for (auto _ : state) benchmark::DoNotOptimize(matmul(opa, opb).data_ptr());
  kernels::set_cpu_bf16_dot(saved);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * g.m * g.n * g.k, benchmark::Counter::kIsIterationInvariantRate);
}

#if BRISK_BENCH_OPENBLAS
void BM_OpenBlasOneCall(benchmark::State& state) {
  openblas_set_num_threads(1);
  const LayerGemm& g = kLayerGemms[state.range(0)];
  Tensor a = randn({g.m * g.k}), b = randn({g.k * g.n}), c = empty({g.m * g.n}, DType::F32);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, a.data<float>(),
                static_cast<int>(g.ta ? g.m : g.k), b.data<float>(), static_cast<int>(g.tb ? g.k : g.n), 0.0f,
                c.data<float>(), static_cast<int>(g.n));
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * g.m * g.n * g.k, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

void layer_gemms(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < static_cast<int64_t>(std::size(kLayerGemms)); ++i)
    for (int t : {1, 2})
      for (int library : {0, 1}) b->Args({i, t, library});
  b->ArgNames({"shape", "threads", "openblas0_eigen1"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

void layer_gemms_bf16(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < static_cast<int64_t>(std::size(kLayerGemms)); ++i)
    for (int t : {1, 2})
      for (int dot : {1, 0}) b->Args({i, t, dot});
  b->ArgNames({"shape", "threads", "dot"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

void one_call(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < static_cast<int64_t>(std::size(kLayerGemms)); ++i) b->Args({i});
  b->ArgNames({"shape"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {64, 128, 256, 512, 1024})
    for (int t : {1, 2}) b->Args({n, t});
  b->ArgNames({"n", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_BriskMatmul)->Apply(sizes);
BENCHMARK(BM_EigenGemm)->Apply(sizes);
BENCHMARK(BM_BriskMatmulTransposedB)->Apply(sizes);
BENCHMARK(BM_BriskLayerGemm)->Apply(layer_gemms);
BENCHMARK(BM_BriskLayerGemmBf16)->Apply(layer_gemms_bf16);
#if BRISK_BENCH_OPENBLAS
BENCHMARK(BM_OpenBlasOneCall)->Apply(one_call);
#endif
BENCHMARK_MAIN();
