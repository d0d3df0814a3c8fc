// Elementwise kernels in GB/s (bytes read + written), on 1 and 2 threads.
#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include "bench_common.h"

using namespace brisk;
using namespace brisk::kernels;

namespace {

void BM_Add(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({n}), b = randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(binary(BinaryOp::Add, a, b).data_ptr());
  state.SetBytesProcessed(state.iterations() * n * 3 * 4);
}

void BM_MulBroadcastRow(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({n / 1024, 1024}), b = randn({1024});
  for (auto _ : state) benchmark::DoNotOptimize(binary(BinaryOp::Mul, a, b).data_ptr());
  state.SetBytesProcessed(state.iterations() * n * 2 * 4);
}

void BM_Relu(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(unary(UnaryOp::Relu, a).data_ptr());
  state.SetBytesProcessed(state.iterations() * n * 2 * 4);
}

void BM_Exp(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(unary(UnaryOp::Exp, a).data_ptr());
  state.SetBytesProcessed(state.iterations() * n * 2 * 4);
}

void BM_AddTransposed(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({1024, n / 1024}), b = randn({n / 1024, 1024});
  Tensor at = a.as_strided({n / 1024, 1024}, {1, n / 1024}, 0);  // a strided (transposed) operand
  for (auto _ : state) benchmark::DoNotOptimize(binary(BinaryOp::Add, at, b).data_ptr());
  state.SetBytesProcessed(state.iterations() * n * 3 * 4);
}

void BM_ContiguousOfTransposed(benchmark::State& state) {  // x.transpose(0, 1).contiguous()
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({1024, n / 1024});
  Tensor at = a.as_strided({n / 1024, 1024}, {1, n / 1024}, 0);
  for (auto _ : state) benchmark::DoNotOptimize(kernels::contiguous(at).data_ptr());
  state.SetBytesProcessed(state.iterations() * n * 2 * 4);
}

void BM_CastF32ToBF16(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const int64_t n = state.range(0);
  Tensor a = randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(cast(a, DType::BF16).data_ptr());
  state.SetBytesProcessed(state.iterations() * n * 6);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1 << 16, 1 << 20, 1 << 24})
    for (int t : {1, 2}) b->Args({n, t});
  b->ArgNames({"n", "threads"})->UseRealTime();
}

}  // namespace

BENCHMARK(BM_Add)->Apply(sizes);
BENCHMARK(BM_MulBroadcastRow)->Apply(sizes);
BENCHMARK(BM_Relu)->Apply(sizes);
BENCHMARK(BM_Exp)->Apply(sizes);
BENCHMARK(BM_AddTransposed)->Apply(sizes);
BENCHMARK(BM_ContiguousOfTransposed)->Apply(sizes);
BENCHMARK(BM_CastF32ToBF16)->Apply(sizes);
BENCHMARK_MAIN();
