// bf16 matrix products with the CPU's bf16 dot-product instruction (AVX512_BF16's VDPBF16PS),
// compiled for it with a target attribute and called only when the CPU has it (found at run
// time), so any build carries it.
//
// VDPBF16PS takes two vectors of 32 bf16 values and one of 16 f32 accumulators and adds to
// accumulator i the products of the pair (2i, 2i + 1): acc[i] += a[2i] b[2i] + a[2i+1] b[2i+1].
// A product of two bf16 values (8-bit mantissas) is exact in f32, so what rounds is the sum.
// The product C = op(A) op(B) is blocked as in every BLAS (Goto's scheme): a block of kKC values
// of k and kNC columns of op(B) is packed into micro-panels of kNR columns whose k values come in
// pairs, (B(k, j), B(k+1, j)) as one 32-bit word, so one 512-bit load gives 16 columns' pairs; a
// block of kMC rows of op(A) is packed into micro-panels of kMR rows, each row's pair again one
// 32-bit word, broadcast to all 16 lanes. The micro-kernel keeps a kMR x kNR tile of C in 24
// registers and walks the k pairs of one block. Rows, columns and k past the matrix are packed as
// zeros, so edge tiles run the same kernel and store only what exists.
//
// Determinism: every element of C is summed over k in one order that depends only on K (pairs
// in order within a block, blocks in order), never on M, N, threads or the tile an element falls
// in. The instruction treats denormal inputs as zero and flushes denormal results to zero
// (a documented property of VDPBF16PS, independent of MXCSR); results are rounded to nearest even.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "brisk/kernels/linalg.h"
#include "brisk/util/env.h"
#include "brisk/util/error.h"
#include "cpu/linalg_kernels.h"

namespace brisk::kernels::cpu {

namespace {

constexpr int kMR = 12;                     // rows of a C tile
constexpr int kNR = 32;                     // columns of a C tile: two vectors of 16 f32
constexpr int64_t kKC = 384;                // k values per block (even): a B micro-panel is 24 KiB, in L1
constexpr int64_t kMC = int64_t{8} * kMR;   // rows per packed A block (96 x 384 bf16 = 72 KiB, in L2)
constexpr int64_t kNC = int64_t{16} * kNR;  // columns per packed B block (384 x 512 bf16 = 384 KiB, in L2)

inline uint32_t pair_of(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

inline uint32_t load_pair(const uint16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Packs lines [i0, i0 + count) and k [k0, k0 + kc) of an operand into micro-panels of R lines:
// panel r holds, for each pair q, the words (X(i, k0+2q), X(i, k0+2q+1)) of its R lines, zeros
// past the end. A line is a row of op(A) (R = kMR) or a column of op(B) (R = kNR). `adjacent`:
// a line's k values are adjacent in memory, X(i, k) = X[i * ld + k] (A as stored, or a linear
// layer's weight read transposed as B); otherwise X(i, k) = X[k * ld + i] and a pair comes from
// two stored rows.
template <int R>
void pack_lines(const uint16_t* X, int64_t ld, bool adjacent, int64_t i0, int64_t count, int64_t k0, int64_t kc,
                uint32_t* out) {
  const int64_t pairs = (kc + 1) / 2, full = kc / 2;
  for (int64_t r0 = 0; r0 < count; r0 += R) {
    uint32_t* panel = out + r0 * pairs;
    const int64_t n = std::min<int64_t>(R, count - r0);
    if (n < R) std::fill(panel, panel + pairs * R, 0u);
    if (adjacent) {
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t* line = X + (i0 + r0 + i) * ld + k0;
        for (int64_t q = 0; q < full; ++q) panel[q * R + i] = load_pair(line + 2 * q);
        if (kc & 1) panel[full * R + i] = line[kc - 1];
      }
    } else {
      for (int64_t q = 0; q < pairs; ++q) {
        const uint16_t* r_lo = X + (k0 + 2 * q) * ld + i0 + r0;
        const uint16_t* r_hi = 2 * q + 1 < kc ? r_lo + ld : nullptr;
        uint32_t* dst = panel + q * R;
        if (r_hi) {
          for (int64_t i = 0; i < n; ++i) dst[i] = pair_of(r_lo[i], r_hi[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) dst[i] = r_lo[i];
        }
      }
    }
  }
}

}  // namespace

// In namespace avx512 with the AVX-512 copies of the hot kernels: code that runs only on CPUs that
// have the instructions (scripts/check-portable.sh allows AVX registers there alone).
namespace avx512 {
namespace {

// C tile (mr x nr of kMR x kNR, row stride ldc) = (first ? beta * C : C) + sum over the block's
// pairs of a's rows times b's columns.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void micro_kernel(int64_t pairs, const uint32_t* a,
                                                                         const uint32_t* b, float* C, int64_t ldc,
                                                                         int64_t mr, int64_t nr, bool first,
                                                                         float beta) {
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + q * kNR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + q * kNR + 16);
    const uint32_t* aq = a + q * kMR;
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(aq[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : nr > 16 ? __mmask16((1u << (nr - 16)) - 1) : __mmask16(0);
  const bool overwrite = first && beta == 0.0f, scale = first && beta != 1.0f && beta != 0.0f;
  const __m512 vbeta = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    if (i >= mr) break;
    float* c = C + i * ldc;
    __m512 v0 = acc[i][0], v1 = acc[i][1];
    if (!overwrite) {
      __m512 old0 = _mm512_maskz_loadu_ps(m0, c), old1 = _mm512_maskz_loadu_ps(m1, c + 16);
      if (scale) {
        old0 = _mm512_mul_ps(old0, vbeta);
        old1 = _mm512_mul_ps(old1, vbeta);
      }
      v0 = _mm512_add_ps(old0, v0);
      v1 = _mm512_add_ps(old1, v1);
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
  }
}

}  // namespace
}  // namespace avx512

void gemm_bf16_serial(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                      const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  // Per thread, kept: packing never allocates after a thread's first product.
  thread_local std::vector<uint32_t> a_pack, b_pack;
  a_pack.resize(static_cast<size_t>(kMC * (kKC / 2)));
  b_pack.resize(static_cast<size_t>(kNC * (kKC / 2)));
  for (int64_t jc = 0; jc < N; jc += kNC) {
    const int64_t nc = std::min(kNC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      const int64_t kc = std::min(kKC, K - pc), pairs = (kc + 1) / 2;
      pack_lines<kNR>(B, ldb, tb, jc, nc, pc, kc, b_pack.data());
      for (int64_t ic = 0; ic < M; ic += kMC) {
        const int64_t mc = std::min(kMC, M - ic);
        pack_lines<kMR>(A, lda, !ta, ic, mc, pc, kc, a_pack.data());
        for (int64_t c0 = 0; c0 < nc; c0 += kNR) {
          const uint32_t* bp = b_pack.data() + c0 * pairs;
          for (int64_t r0 = 0; r0 < mc; r0 += kMR)
            avx512::micro_kernel(pairs, a_pack.data() + r0 * pairs, bp, C + (ic + r0) * ldc + jc + c0, ldc,
                                 std::min<int64_t>(kMR, mc - r0), std::min<int64_t>(kNR, nc - c0), pc == 0, beta);
        }
      }
    }
  }
}

}  // namespace brisk::kernels::cpu

namespace brisk::kernels {

namespace {

// -1 until first asked: then on where the CPU has the instruction, unless BRISK_CPU_BF16_DOT says 0.
std::atomic<int> g_bf16_dot{-1};

}  // namespace

bool cpu_bf16_dot_available() {
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  return has;
}

bool cpu_bf16_dot() {
  int v = g_bf16_dot.load(std::memory_order_relaxed);
  if (v < 0) {
    const bool want = envvar::get_bool("BRISK_CPU_BF16_DOT", true);
    BRISK_CHECK(!want || cpu_bf16_dot_available() || !envvar::get("BRISK_CPU_BF16_DOT"),
                "BRISK_CPU_BF16_DOT=", *envvar::get("BRISK_CPU_BF16_DOT"),
                ": this CPU has no bf16 dot-product instructions (AVX512_BF16); unset it or set it to 0");
    v = want && cpu_bf16_dot_available() ? 1 : 0;
    g_bf16_dot.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

void set_cpu_bf16_dot(bool on) {
  BRISK_CHECK(!on || cpu_bf16_dot_available(),
              "set_cpu_bf16_dot(true): this CPU has no bf16 dot-product instructions (AVX512_BF16); bf16 products "
              "convert to f32 here");
  g_bf16_dot.store(on ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace brisk::kernels
