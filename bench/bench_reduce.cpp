// Softmax, log-softmax and reductions in GB/s (bytes read + written), rows x 1024 f32, 1 and 2 threads.
#include <brisk/brisk.h>
#include <brisk/kernels/reduce.h>

#include "bench_common.h"

using namespace brisk;

namespace {

void BM_SoftmaxLastDim(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t rows = state.range(0);
  Tensor x = randn({rows, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::softmax(x, -1).data_ptr());
  state.SetBytesProcessed(state.iterations() * rows * 1024 * 4 * 2);
}

void BM_LogSoftmaxLastDim(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t rows = state.range(0);
  Tensor x = randn({rows, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::log_softmax(x, -1).data_ptr());
  state.SetBytesProcessed(state.iterations() * rows * 1024 * 4 * 2);
}

void BM_SumLastDim(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t rows = state.range(0);
  Tensor x = randn({rows, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::sum(x, {1}).data_ptr());
  state.SetBytesProcessed(state.iterations() * rows * 1024 * 4);
}

void BM_SumFirstDim(benchmark::State& state) {  // the bias-gradient reduction
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t rows = state.range(0);
  Tensor x = randn({rows, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::sum(x, {0}).data_ptr());
  state.SetBytesProcessed(state.iterations() * rows * 1024 * 4);
}

void BM_SumAll(benchmark::State& state) {  // a whole tensor to one number (rows x 1024 elements)
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t rows = state.range(0);
  Tensor x = randn({rows, 1024});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::sum(x, {0, 1}).data_ptr());
  state.SetBytesProcessed(state.iterations() * rows * 1024 * 4);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t rows : {64, 1024, 8192})
    for (int t : {1, 2}) b->Args({rows, t});
  b->ArgNames({"rows", "threads"})->UseRealTime();
}

}  // namespace

BENCHMARK(BM_SoftmaxLastDim)->Apply(sizes);
BENCHMARK(BM_LogSoftmaxLastDim)->Apply(sizes);
BENCHMARK(BM_SumLastDim)->Apply(sizes);
BENCHMARK(BM_SumFirstDim)->Apply(sizes);
BENCHMARK(BM_SumAll)->Apply(sizes);
BENCHMARK_MAIN();
