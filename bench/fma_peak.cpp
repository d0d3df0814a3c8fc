// One core's peak fp32 throughput: a tight loop of independent 8-wide fused multiply-adds (AVX2 +
// FMA), the yardstick bench/RESULTS.md divides the training programs' GFLOP/s by.
// An FMA has a latency of 4-5 cycles and a core issues up to 2 per cycle, so 2 x 5 = 10 chains
// must be in flight to keep both pipes busy; the loop keeps 12 independent accumulators (of the
// 16 ymm registers). Each FMA counts as 2 flops x 8 lanes.
// Usage: fma_peak [--seconds S] [--repeats R]   prints the best of R runs of about S seconds each.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if !defined(__AVX2__) || !defined(__FMA__)
// Built without AVX2 + FMA (BRISK_NATIVE=OFF, or another CPU): nothing to measure.
int main() {
  std::fputs("fma_peak: built without AVX2 and FMA (needs -march=native on an x86-64 CPU that has them)\n", stderr);
  return 1;
}
#else
#include <immintrin.h>

namespace {

constexpr int kAcc = 12;

// n iterations of kAcc independent FMA chains; returns a value depending on all of them so the
// compiler cannot drop the loop.
__attribute__((noinline)) float fma_loop(long long n, float seed) {
  __m256 acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_set1_ps(seed + static_cast<float>(j) * 1e-3f);
  // a * x + b with |a| < 1 stays bounded (converges to b / (1 - a)): no overflow, no denormals.
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (long long i = 0; i < n; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 s = acc[0];
  for (int j = 1; j < kAcc; ++j) s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  float t = 0;
  for (float v : out) t += v;
  return t;
}

bool parse_double(const char* s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v > 0) || v > 3600) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0, repeats = 5;
  const char* usage =
      "usage: fma_peak [--seconds S] [--repeats R]\n"
      "Measures one core's fp32 FMA throughput (AVX2, 12 independent chains): best GFLOP/s of R runs\n"
      "(default 5) of about S seconds (default 1).\n";
  for (int i = 1; i < argc; i += 2) {  // flags come with a value: "--seconds S"
    std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    double* dst = f == "--seconds" ? &seconds : f == "--repeats" ? &repeats : nullptr;
    if (dst == nullptr || i + 1 >= argc || !parse_double(argv[i + 1], dst)) {
      std::fprintf(stderr, "fma_peak: bad option %s\n%s", f.c_str(), usage);
      return 2;
    }
  }
  // Calibrate the iteration count to about `seconds`.
  long long n = 1 << 20;
  float sink = 0;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    sink += fma_loop(n, 1.0f);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.1) {
      n = static_cast<long long>(static_cast<double>(n) * seconds / s);
      break;
    }
    n *= 4;
  }
  double best = 0;
  for (int r = 0; r < static_cast<int>(repeats); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    sink += fma_loop(n, 1.0f + static_cast<float>(r));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double gflops = static_cast<double>(n) * kAcc * 8 * 2 / s * 1e-9;
    std::printf("run %d: %.1f GFLOP/s\n", r + 1, gflops);
    if (gflops > best) best = gflops;
  }
  std::printf("fp32 FMA peak, one core: %.1f GFLOP/s (best of %d; checksum %g)\n", best, static_cast<int>(repeats),
              static_cast<double>(sink));
}
#endif
