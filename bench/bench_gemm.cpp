// GEMM in GFLOP/s: brisk::matmul against Eigen's own GEMM called directly (the reference),
// square sizes 64..1024 on 1 and 2 threads. brisk should stay within 10% of Eigen at >= 512.
// BM_BriskLayerGemm: the products of the example CNN's first linear layer (batch 64, 1568 -> 256)
// and of a small GPT's layers (8 x 256 tokens, width 384), forward and both gradients.
#include <brisk/brisk.h>

#include <Eigen/Core>
#include <iterator>

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
  const LayerGemm& g = kLayerGemms[state.range(0)];
  Tensor a = randn(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}), b = randn(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n});
  Tensor opa = g.ta ? a.t() : a, opb = g.tb ? b.t() : b;
  for (auto _ : state) benchmark::DoNotOptimize(matmul(opa, opb).data_ptr());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * g.m * g.n * g.k, benchmark::Counter::kIsIterationInvariantRate);
}

void layer_gemms(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < static_cast<int64_t>(std::size(kLayerGemms)); ++i)
    for (int t : {1, 2}) b->Args({i, t});
  b->ArgNames({"shape", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
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
BENCHMARK_MAIN();
