// conv2d forward and forward+backward on the example CNN's two conv layers (batch 64), and the
// 2x2 max-pool after each, on 1 and 2 threads. Reported per call; images/s for the whole batch.
#include <brisk/brisk.h>
#include <brisk/kernels/conv.h>

#include "bench_common.h"

using namespace brisk;

namespace {

struct Layer {
  int64_t cin, cout, hw;
  bool need_input_grad;  // the first layer's input is data: no input gradient
};
const Layer kLayers[] = {{1, 16, 28, false}, {16, 32, 14, true}};

void BM_Conv2dForward(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const Layer& l = kLayers[state.range(0)];
  Tensor x = randn({64, l.cin, l.hw, l.hw}), w = randn({l.cout, l.cin, 3, 3}), b = randn({l.cout});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::conv2d(x, w, b, {.padding = 1}).data_ptr());
  state.counters["images/s"] = benchmark::Counter(64, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Conv2dForwardBackward(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const Layer& l = kLayers[state.range(0)];
  Tensor x = randn({64, l.cin, l.hw, l.hw}), w = randn({l.cout, l.cin, 3, 3}), b = randn({l.cout});
  Tensor g = randn({64, l.cout, l.hw, l.hw});
  for (auto _ : state) {
    Tensor y = kernels::conv2d(x, w, b, {.padding = 1});
    auto grads = kernels::conv2d_backward(g, x, w, {.padding = 1}, l.need_input_grad, true, true);
    benchmark::DoNotOptimize(y.data_ptr());
    benchmark::DoNotOptimize(grads.weight.data_ptr());
  }
  state.counters["images/s"] = benchmark::Counter(64, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MaxPool2x2ForwardBackward(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const Layer& l = kLayers[state.range(0)];
  Tensor x = randn({64, l.cout, l.hw, l.hw});
  for (auto _ : state) {
    auto r = kernels::max_pool2d(x, 2);
    benchmark::DoNotOptimize(kernels::max_pool2d_backward(r.values, r.indices, x.sizes()).data_ptr());
  }
}

void BM_MaxPool2x2Forward(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const Layer& l = kLayers[state.range(0)];
  Tensor x = randn({64, l.cout, l.hw, l.hw});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::max_pool2d(x, 2).values.data_ptr());
}

void BM_MaxPool2x2Backward(benchmark::State& state) {
  bench::ThreadScope threads(static_cast<int>(state.range(1)));
  const Layer& l = kLayers[state.range(0)];
  Tensor x = randn({64, l.cout, l.hw, l.hw});
  auto r = kernels::max_pool2d(x, 2);
  for (auto _ : state)
    benchmark::DoNotOptimize(kernels::max_pool2d_backward(r.values, r.indices, x.sizes()).data_ptr());
}

void layers(benchmark::internal::Benchmark* b) {
  for (int layer : {0, 1})
    for (int t : {1, 2}) b->Args({layer, t});
  b->ArgNames({"layer", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_Conv2dForward)->Apply(layers);
BENCHMARK(BM_Conv2dForwardBackward)->Apply(layers);
BENCHMARK(BM_MaxPool2x2ForwardBackward)->Apply(layers);
BENCHMARK(BM_MaxPool2x2Forward)->Apply(layers);
BENCHMARK(BM_MaxPool2x2Backward)->Apply(layers);
BENCHMARK_MAIN();
