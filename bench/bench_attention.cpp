// Causal self-attention of the small GPT (batch 8, 6 heads, T = 256, head dim 64, f32), forward
// and backward: scaled_dot_product_attention (only the scores each query may see, in blocks of 64
// queries) against the unfused ops it replaced (matmul, a -inf bias, softmax, matmul over the
// whole (T, T) square). 1 thread.
#include <brisk/brisk.h>

#include <cmath>

#include "bench_common.h"

using namespace brisk;

namespace {

constexpr int64_t kB = 8, kH = 6, kT = 256, kD = 64;

Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v) {
  Tensor s = matmul(q * (1.0 / std::sqrt(static_cast<double>(kD))), k.transpose(-2, -1));
  return matmul(softmax(s + triu(full({kT, kT}, -INFINITY), 1), -1), v);
}

template <bool kFused>
void BM_CausalAttention(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(0)));
  Tensor q = randn({kB, kH, kT, kD}).requires_grad_(), k = randn({kB, kH, kT, kD}).requires_grad_(),
         v = randn({kB, kH, kT, kD}).requires_grad_();
  Tensor w = randn({kB, kH, kT, kD});
  for (auto _ : state) {
    Tensor y = kFused ? scaled_dot_product_attention(q, k, v, {.is_causal = true}) : unfused(q, k, v);
    (y * w).sum().backward();
    benchmark::DoNotOptimize(q.grad().data_ptr());
    q.set_grad(Tensor());
    k.set_grad(Tensor());
    v.set_grad(Tensor());
  }
  // The products over the whole square, forward and backward (2 forward + 4 backward, 2 flops
  // per multiply-add), as the usual estimate counts them; the fused form does about 5/8 of them.
  state.counters["GFLOP/s(full square)"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 6.0 * 2.0 * kB * kH * kT * kT * kD / 1e9, benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_CausalAttention<true>)
    ->Name("BM_CausalAttention/fused")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CausalAttention<false>)
    ->Name("BM_CausalAttention/unfused")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_MAIN();
