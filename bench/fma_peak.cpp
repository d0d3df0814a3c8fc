// One core's peak fp32 throughput: a tight loop of independent 8-wide fused multiply-adds (AVX2 +
// FMA), the yardstick bench/RESULTS.md divides the training programs' GFLOP/s by. Where the CPU
// has them, also 16-wide AVX-512 FMAs and AVX512_BF16's VDPBF16PS (32 bf16 multiply-adds into 16
// f32 sums, counted as 64 flops: the peak of brisk's bf16 GEMM kernel).
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

constexpr int kAcc512 = 24;  // AVX-512 chains (of the 32 zmm registers)

__attribute__((target("avx512f"))) inline void start_chains(__m512* acc, float seed) {
  for (int j = 0; j < kAcc512; ++j) acc[j] = _mm512_set1_ps(seed + static_cast<float>(j) * 1e-3f);
}

// A value that depends on every chain, so the compiler cannot drop the loop.
__attribute__((target("avx512f"))) inline float sum_chains(const __m512* acc) {
  __m512 s = acc[0];
  for (int j = 1; j < kAcc512; ++j) s = _mm512_add_ps(s, acc[j]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  float t = 0;
  for (float v : out) t += v;
  return t;
}

// The same with 16-wide AVX-512 FMAs.
__attribute__((noinline, target("avx512f"))) float fma512_loop(long long n, float seed) {
  __m512 acc[kAcc512];
  start_chains(acc, seed);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (long long i = 0; i < n; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < kAcc512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  return sum_chains(acc);
}

// VDPBF16PS: acc += a[2i] b[2i] + a[2i+1] b[2i+1], 24 chains; the products are tiny, so the sums
// grow slowly and stay normal.
__attribute__((noinline, target("avx512f,avx512bf16"))) float dpbf16_loop(long long n, float seed) {
  __m512 acc[kAcc512];
  start_chains(acc, seed);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  for (long long i = 0; i < n; ++i) {
#pragma GCC unroll 24
    for (int j = 0; j < kAcc512; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  return sum_chains(acc);
}

using Loop = float (*)(long long, float);

// Best GFLOP/s of `repeats` runs of about `seconds` of `loop`, which does `flops` per iteration.
double measure(const char* name, Loop loop, double flops, double seconds, int repeats) {
  long long n = 1 << 16;
  float sink = 0;
  for (;;) {  // calibrate the iteration count to about `seconds`
    auto t0 = std::chrono::steady_clock::now();
    sink += loop(n, 1.0f);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.1) {
      n = static_cast<long long>(static_cast<double>(n) * seconds / s);
      break;
    }
    n *= 4;
  }
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    sink += loop(n, 1.0f + static_cast<float>(r));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double gflops = static_cast<double>(n) * flops / s * 1e-9;
    std::printf("%s run %d: %.1f GFLOP/s\n", name, r + 1, gflops);
    if (gflops > best) best = gflops;
  }
  std::printf("%s peak, one core: %.1f GFLOP/s (best of %d; checksum %g)\n", name, best, repeats,
              static_cast<double>(sink));
  return best;
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
      "Measures one core's fp32 FMA throughput (AVX2, 12 independent chains) and, where the CPU has\n"
      "them, AVX-512 FMAs and AVX512_BF16 dot products: best GFLOP/s of R runs (default 5) of about\n"
      "S seconds (default 1) each.\n";
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
  const int r = static_cast<int>(repeats);
  measure("fp32 FMA", fma_loop, kAcc * 8 * 2, seconds, r);
  if (__builtin_cpu_supports("avx512f")) measure("fp32 AVX-512 FMA", fma512_loop, 24 * 16 * 2, seconds, r);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    measure("bf16 VDPBF16PS", dpbf16_loop, 24 * 32 * 2, seconds, r);
}
#endif
