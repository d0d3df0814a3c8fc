// GEMM in GFLOP/s: brisk::matmul against Eigen's own GEMM called directly (the reference),
// square sizes 64..1024 on 1 and 2 threads. brisk should stay within 10% of Eigen at >= 512.
#include <Eigen/Core>
#include <brisk/brisk.h>

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

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {64, 128, 256, 512, 1024})
    for (int t : {1, 2}) b->Args({n, t});
  b->ArgNames({"n", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_BriskMatmul)->Apply(sizes);
BENCHMARK(BM_EigenGemm)->Apply(sizes);
BENCHMARK(BM_BriskMatmulTransposedB)->Apply(sizes);
BENCHMARK_MAIN();
