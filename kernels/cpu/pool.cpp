// CPU pooling: max (with argmax indices), average and adaptive average, forward and backward.
// Work is split over (N * C) planes; each plane is handled by one thread, so results never
// depend on the thread count. f16/bf16 load, compute in f32, store.
#if defined(__AVX512F__)
// GCC 12 reports a false (maybe-)uninitialized inside its own AVX-512 intrinsics' headers (the
// same false positive kernels/cpu/linalg.cpp silences for Eigen's kernels).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "brisk/kernels/dispatch.h"
#include "cpu/conv_cpu.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {
namespace {

// Planes per parallel loop are worth splitting only when there is enough work.
bool worth_parallel(int64_t work) {
  return work >= 16384;
}

// Gradient accumulation into one input plane: directly for f32/f64, through an f32 scratch
// plane for f16/bf16 so overlapping windows round once.
template <class T>
class PlaneAcc {
 public:
  using A = acc_t<T>;
  PlaneAcc(T* plane, int64_t n) : plane_(plane), n_(n) {
    if constexpr (std::is_same_v<A, T>) {
      std::fill(plane, plane + n, T(0));
      acc_ = plane;
    } else {
      scratch_.assign(static_cast<size_t>(n), A(0));
      acc_ = scratch_.data();
    }
  }
  A& operator[](int64_t i) { return acc_[i]; }
  void finish() {
    if constexpr (!std::is_same_v<A, T>) {
      for (int64_t i = 0; i < n_; ++i) plane_[i] = static_cast<T>(acc_[i]);
    }
  }

 private:
  T* plane_;
  int64_t n_;
  A* acc_;
  std::vector<A> scratch_;
};

// Output columns [ow0, ow1) whose tap at kernel column j, input column ow * sw + off with
// off = j * dw - pw, lies inside [0, w).
struct TapRange {
  int64_t off, ow0, ow1;
};
TapRange tap_range(const PoolGeom& g, int64_t j) {
  const int64_t off = j * g.dw - g.pw;
  const int64_t ow0 = std::min(g.ow, off >= 0 ? 0 : (-off + g.sw - 1) / g.sw);
  const int64_t ow1 = g.w - off <= 0 ? 0 : std::min(g.ow, (g.w - off + g.sw - 1) / g.sw);
  return {off, ow0, std::max(ow0, ow1)};
}

// Works one output row at a time, tap by tap across the row, so the inner loop is a
// branch-free, vectorisable select (random data would mispredict a per-element branch).
// Taps run in row-major window order with a strict >, so the first maximum wins; as
// PyTorch, a NaN always wins so it propagates.
// Running maximum step: a strictly greater value or a NaN takes over (so NaN propagates).
template <class A>
inline void max_step(A v, int64_t i, A& best, int64_t& best_i) {
  const bool take = v > best || v != v;
  best = take ? v : best;
  best_i = take ? i : best_i;
}

#if defined(__AVX512F__)
// f32 2x2 / stride 2 with AVX-512, 16 outputs at a time (a CNN's rows are often shorter than a
// vector: 28 -> 14 -> 7, so the tail is masked rather than left to scalar code, whose compares
// mispredict about half the time on real data). The two input rows of 32 values are split into
// their even and odd columns with one permute each; the taps are taken in window order with the
// scalar path's rule (strictly greater, or a NaN, takes over), so values and indices are the
// same bits as max_step's.
constexpr int32_t kEvenLanes[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
constexpr int32_t kOddLanes[16] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};

inline __mmask16 low_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Output row `oh` of one plane: n_out = ow outputs. The argmax goes to `ir` as an i64 flat
// index into the plane (b0: the row's first input index), or with kTaps as a u8 tap (0, 1, 2, 3
// in window order; kDroppedTap where `drop` and the maximum is not > 0).
template <bool kTaps>
inline void max_pool_2x2_row_avx512(const float* r0, const float* r1, int64_t w, int64_t b0, int64_t n_out, float* yr,
                                    void* ir, bool drop) {
  const __m512i even = _mm512_loadu_si512(kEvenLanes), odd = _mm512_loadu_si512(kOddLanes);
  const __m512i lane2 = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 1);
  // The taps' codes: their offsets from the window's corner (0, 1, w, w + 1), or their numbers.
  const __m512i t1 = _mm512_set1_epi32(1), t2 = _mm512_set1_epi32(kTaps ? 2 : static_cast<int32_t>(w)),
                t3 = _mm512_set1_epi32(kTaps ? 3 : static_cast<int32_t>(w + 1));
  for (int64_t o = 0; o < n_out; o += 16) {
    const int64_t n = std::min<int64_t>(16, n_out - o);
    const __mmask16 m = low_lanes(n), m_lo = low_lanes(2 * n), m_hi = low_lanes(2 * n - 16);
    const float* p0 = r0 + 2 * o;
    const float* p1 = r1 + 2 * o;
    const __m512 a_lo = _mm512_maskz_loadu_ps(m_lo, p0), a_hi = _mm512_maskz_loadu_ps(m_hi, p0 + 16);
    const __m512 c_lo = _mm512_maskz_loadu_ps(m_lo, p1), c_hi = _mm512_maskz_loadu_ps(m_hi, p1 + 16);
    __m512 best = _mm512_permutex2var_ps(a_lo, even, a_hi);
    __m512i code = _mm512_setzero_si512();
    auto step = [&](__m512 v, __m512i tap) {
      const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      best = _mm512_mask_mov_ps(best, take, v);
      code = _mm512_mask_mov_epi32(code, take, tap);
    };
    step(_mm512_permutex2var_ps(a_lo, odd, a_hi), t1);
    step(_mm512_permutex2var_ps(c_lo, even, c_hi), t2);
    step(_mm512_permutex2var_ps(c_lo, odd, c_hi), t3);
    _mm512_mask_storeu_ps(yr + o, m, best);
    if constexpr (kTaps) {
      if (drop) {
        const __mmask16 kept = _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ);
        code = _mm512_mask_mov_epi32(_mm512_set1_epi32(kDroppedTap), kept, code);
      }
      _mm512_mask_cvtepi32_storeu_epi8(static_cast<uint8_t*>(ir) + o, m, code);
    } else {
      // index = b0 + 2 * (o + lane) + offset, in 64 bits.
      int64_t* out = static_cast<int64_t*>(ir) + o;
      const __m512i rel =
          _mm512_add_epi32(_mm512_add_epi32(lane2, _mm512_set1_epi32(static_cast<int32_t>(2 * o))), code);
      const __m512i base = _mm512_set1_epi64(b0);
      _mm512_mask_storeu_epi64(out, static_cast<__mmask8>(m),
                               _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(rel))));
      _mm512_mask_storeu_epi64(out + 8, static_cast<__mmask8>(m >> 8),
                               _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(rel, 1))));
    }
  }
}
#endif

// Where max pooling writes each window's argmax (exactly one of the two pointers is set).
struct ArgmaxOut {
  int64_t* index = nullptr;  // i64 flat index into the input plane, as PyTorch
  uint8_t* tap = nullptr;    // u8 tap in the window (i * kW + j), for backward passes only
  bool drop = false;         // taps: kDroppedTap where the maximum is not > 0
};

// A window's argmax from its tap t (the window's top-left input at (h0, w0)) into `a` at o.
template <class A>
inline void put_argmax(const ArgmaxOut& a, const PoolGeom& g, int64_t o, int64_t t, int64_t h0, int64_t w0, A best) {
  if (a.tap != nullptr)
    a.tap[o] = a.drop && !(best > A(0)) ? kDroppedTap : static_cast<uint8_t>(t);
  else
    a.index[o] = (h0 + t / g.kw * g.dh) * g.w + w0 + t % g.kw * g.dw;
}

// The CNN's common case, 2x2 windows with stride 2 and no padding: straight-line, branch-free.
template <class T>
void max_pool_2x2_impl(const PoolGeom& g, const T* x, T* y, const ArgmaxOut& a) {
  using A = acc_t<T>;
  const int64_t w = g.w, oh_n = g.oh, ow_n = g.ow, in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#if defined(__AVX512F__)
  // Offsets within a plane travel in 32-bit lanes: planes below 2^30 elements (the scalar path otherwise).
  if constexpr (std::is_same_v<T, float>) {
    if (g.h * g.w < (int64_t{1} << 30)) {
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * out_plane * 4))
      for (int64_t pl = 0; pl < g.planes; ++pl)
        for (int64_t oh = 0; oh < oh_n; ++oh) {
          const float* r0 = x + pl * in_plane + 2 * oh * w;
          const int64_t o = pl * out_plane + oh * ow_n;
          if (a.tap != nullptr)
            max_pool_2x2_row_avx512<true>(r0, r0 + w, w, 2 * oh * w, ow_n, y + o, a.tap + o, a.drop);
          else
            max_pool_2x2_row_avx512<false>(r0, r0 + w, w, 2 * oh * w, ow_n, y + o, a.index + o, false);
        }
      return;
    }
  }
#endif
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * out_plane * 4))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * in_plane;
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      const T* r0 = xp + 2 * oh * w;
      const T* r1 = r0 + w;
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const int64_t c = 2 * ow, o = pl * out_plane + oh * ow_n + ow;
        A best = static_cast<A>(r0[c]);
        int64_t t = 0;
        max_step(static_cast<A>(r0[c + 1]), 1, best, t);
        max_step(static_cast<A>(r1[c]), 2, best, t);
        max_step(static_cast<A>(r1[c + 1]), 3, best, t);
        y[o] = static_cast<T>(best);
        put_argmax(a, g, o, t, 2 * oh, c, best);
      }
    }
  }
}

template <class T>
void max_pool_impl(const PoolGeom& g, const T* x, T* y, const ArgmaxOut& a) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  if (g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 &&
      2 * g.oh <= g.h && 2 * g.ow <= g.w) {  // (ceil_mode may add a partial last window)
    max_pool_2x2_impl(g, x, y, a);
    return;
  }
#pragma omp parallel if (worth_parallel(g.planes * out_plane * g.kh * g.kw))
  {
    std::vector<A> best_row(static_cast<size_t>(g.ow));
    std::vector<int64_t> tap_row(static_cast<size_t>(g.ow));
    A* best = best_row.data();
    int64_t* tap = tap_row.data();
    std::vector<TapRange> ranges;  // per kernel column, computed once (integer divisions are slow)
    for (int64_t j = 0; j < g.kw; ++j) ranges.push_back(tap_range(g, j));
#pragma omp for schedule(static)
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      const T* xp = x + pl * in_plane;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t o0 = pl * out_plane + oh * g.ow, h0 = oh * g.sh - g.ph;
        int64_t i0 = 0;  // the first tap row inside the input
        while (h0 + i0 * g.dh < 0) ++i0;
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t j0 = 0;
          while (ow * g.sw - g.pw + j0 * g.dw < 0) ++j0;
          best[ow] = -std::numeric_limits<A>::infinity();
          tap[ow] = i0 * g.kw + j0;  // the first in-bounds tap, kept if all are -inf
        }
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = h0 + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const TapRange& r = ranges[static_cast<size_t>(j)];
            // Locals, so the compiler need not reload g through the aliasing stores.
            const int64_t sw = g.sw, ow0 = r.ow0, ow1 = r.ow1, t = i * g.kw + j;
            const T* in = xp + ih * g.w + r.off;
#pragma omp simd
            for (int64_t ow = ow0; ow < ow1; ++ow) {
              const A v = static_cast<A>(in[ow * sw]);
              const bool take = v > best[ow] || v != v;
              best[ow] = take ? v : best[ow];
              tap[ow] = take ? t : tap[ow];
            }
          }
        }
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          y[o0 + ow] = static_cast<T>(best[ow]);
          put_argmax(a, g, o0 + ow, tap[ow], h0, ow * g.sw - g.pw, best[ow]);
        }
      }
    }
  }
}

#if defined(__AVX512F__)
// Writes 16 outputs' gradients g (lanes past n masked off) into their 2x2 windows: lane i's
// value goes to the window's top-left, top-right, bottom-left or bottom-right element where its
// mask k00, k01, k10 or k11 has bit i, zero to the other three; the windows start at column 2 * col
// of rows row0 and row1.
inline void store_2x2_windows(float* row0, float* row1, int64_t col, int64_t n, __m512 g, __mmask16 k00, __mmask16 k01,
                              __mmask16 k10, __mmask16 k11) {
  constexpr int32_t kInterleaveLo[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
  constexpr int32_t kInterleaveHi[16] = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i lo = _mm512_loadu_si512(kInterleaveLo), hi = _mm512_loadu_si512(kInterleaveHi);
  const __m512 v00 = _mm512_maskz_mov_ps(k00, g), v01 = _mm512_maskz_mov_ps(k01, g);
  const __m512 v10 = _mm512_maskz_mov_ps(k10, g), v11 = _mm512_maskz_mov_ps(k11, g);
  const __mmask16 m_lo = low_lanes(2 * n), m_hi = low_lanes(2 * n - 16);
  _mm512_mask_storeu_ps(row0 + 2 * col, m_lo, _mm512_permutex2var_ps(v00, lo, v01));
  _mm512_mask_storeu_ps(row0 + 2 * col + 16, m_hi, _mm512_permutex2var_ps(v00, hi, v01));
  _mm512_mask_storeu_ps(row1 + 2 * col, m_lo, _mm512_permutex2var_ps(v10, lo, v11));
  _mm512_mask_storeu_ps(row1 + 2 * col + 16, m_hi, _mm512_permutex2var_ps(v10, hi, v11));
}

// The backward of one f32 plane pooled 2x2 / stride 2 (oh = h / 2, ow = w / 2), when every index
// lies in its own output's window (checked here, chunk by chunk): the windows are disjoint, so
// each input element receives at most one gradient and is written once, with no zero fill and no
// scatter. The value written is 0 + g, as the scatter path's accumulation into zeros gives (so a
// -0 gradient lands as +0 on both paths). Returns false, having written part of the plane,
// when an index is elsewhere (the caller then runs the general path over the whole plane).
inline bool max_pool_2x2_backward_plane_avx512(const float* gy, const int64_t* idx, int64_t h, int64_t w, int64_t oh_n,
                                               int64_t ow_n, float* gx) {
  const __m512i lane2 = _mm512_slli_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), 1);
  const __m512i one = _mm512_set1_epi64(1), wv = _mm512_set1_epi64(w), w1 = _mm512_set1_epi64(w + 1);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oh = 0; oh < oh_n; ++oh) {
    float* row0 = gx + 2 * oh * w;
    float* row1 = row0 + w;
    for (int64_t o = 0; o < ow_n; o += 16) {
      const int64_t n = std::min<int64_t>(16, ow_n - o);
      const __mmask16 m = low_lanes(n);
      const __m512 g = _mm512_add_ps(zero, _mm512_maskz_loadu_ps(m, gy + oh * ow_n + o));
      // Each index's offset from its window's corner, 8 lanes at a time.
      __mmask16 at[4] = {0, 0, 0, 0};  // lanes whose maximum is at offset 0, 1, w, w + 1
      for (int64_t half = 0; half < 2; ++half) {
        const __mmask8 mh = static_cast<__mmask8>(m >> (8 * half));
        if (!mh) continue;
        const __m512i corner = _mm512_add_epi64(_mm512_set1_epi64(2 * oh * w + 2 * (o + 8 * half)), lane2);
        const __m512i off = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(mh, idx + oh * ow_n + o + 8 * half), corner);
        const __mmask8 k0 = _mm512_mask_cmpeq_epi64_mask(mh, off, _mm512_setzero_si512());
        const __mmask8 k1 = _mm512_mask_cmpeq_epi64_mask(mh, off, one);
        const __mmask8 k2 = _mm512_mask_cmpeq_epi64_mask(mh, off, wv);
        const __mmask8 k3 = _mm512_mask_cmpeq_epi64_mask(mh, off, w1);
        if (static_cast<__mmask8>(k0 | k1 | k2 | k3) != mh) return false;
        at[0] |= static_cast<__mmask16>(k0) << (8 * half);
        at[1] |= static_cast<__mmask16>(k1) << (8 * half);
        at[2] |= static_cast<__mmask16>(k2) << (8 * half);
        at[3] |= static_cast<__mmask16>(k3) << (8 * half);
      }
      store_2x2_windows(row0, row1, o, n, g, at[0], at[1], at[2], at[3]);
    }
    if (w > 2 * ow_n) row0[w - 1] = row1[w - 1] = 0.0f;  // an odd width's last column is in no window
  }
  if (h > 2 * oh_n) std::fill(gx + (h - 1) * w, gx + h * w, 0.0f);  // an odd height's last row
  return true;
}
#endif

template <class T>
void max_pool_backward_impl(const PoolGeom& g, const T* gy, const int64_t* idx, T* gx) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * in_plane))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    PlaneAcc<T> acc(gx + pl * in_plane, in_plane);
    for (int64_t o = 0; o < out_plane; ++o) acc[idx[pl * out_plane + o]] += static_cast<A>(gy[pl * out_plane + o]);
    acc.finish();
  }
}

// The backward from taps (max_pool_impl's u8 argmax): gx (zeroed first) += gy at each kept tap's
// input, outputs in order, so the sums are those of the index path's scatter. false, with gx
// partly written, when a tap is neither kDroppedTap nor a tap of the window inside the input.
template <class T>
bool max_pool_taps_backward_impl(const PoolGeom& g, const T* gy, const uint8_t* taps, T* gx) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow, n_taps = g.kh * g.kw;
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (worth_parallel(g.planes * in_plane))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    PlaneAcc<T> acc(gx + pl * in_plane, in_plane);
    const uint8_t* tp = taps + pl * out_plane;
    const T* gp = gy + pl * out_plane;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t o = oh * g.ow + ow, t = tp[o];
        if (t == kDroppedTap) continue;
        const int64_t ih = oh * g.sh - g.ph + t / g.kw * g.dh, iw = ow * g.sw - g.pw + t % g.kw * g.dw;
        if (t >= n_taps || ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) {
          bad = 1;
          break;
        }
        acc[ih * g.w + iw] += static_cast<A>(gp[o]);
      }
    }
    acc.finish();
  }
  return bad == 0;
}

// The same for 2x2 windows with stride 2 (oh = h / 2, ow = w / 2): disjoint, so every input
// element is written once, 0 + g at its window's tap and 0 elsewhere, without a zero fill or a
// scatter (0 + g: a -0 gradient lands as +0, as the accumulation into zeros gives).
template <class T>
bool max_pool_taps_backward_2x2_impl(const PoolGeom& g, const T* gy, const uint8_t* taps, T* gx) {
  using A = acc_t<T>;
  const int64_t w = g.w, in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (worth_parallel(g.planes * in_plane))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const uint8_t* tp = taps + pl * out_plane;
    const T* gp = gy + pl * out_plane;
    T* gxp = gx + pl * in_plane;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      T* row0 = gxp + 2 * oh * w;
      T* row1 = row0 + w;
      int64_t ow = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
      if constexpr (std::is_same_v<T, float>) {
        for (; ow < g.ow; ow += 16) {
          const int64_t n = std::min<int64_t>(16, g.ow - ow);
          const __mmask16 m = low_lanes(n);
          const __m512 gv = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, gp + oh * g.ow + ow));
          const __m512i t = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, tp + oh * g.ow + ow));
          const __mmask16 k0 = _mm512_mask_cmpeq_epi32_mask(m, t, _mm512_setzero_si512());
          const __mmask16 k1 = _mm512_mask_cmpeq_epi32_mask(m, t, _mm512_set1_epi32(1));
          const __mmask16 k2 = _mm512_mask_cmpeq_epi32_mask(m, t, _mm512_set1_epi32(2));
          const __mmask16 k3 = _mm512_mask_cmpeq_epi32_mask(m, t, _mm512_set1_epi32(3));
          const __mmask16 kd = _mm512_mask_cmpeq_epi32_mask(m, t, _mm512_set1_epi32(kDroppedTap));
          bad |= static_cast<__mmask16>(k0 | k1 | k2 | k3 | kd) != m;
          store_2x2_windows(row0, row1, ow, n, gv, k0, k1, k2, k3);
        }
      }
#endif
      for (; ow < g.ow; ++ow) {
        const int64_t o = oh * g.ow + ow;
        const uint8_t t = tp[o];
        bad |= t > 3 && t != kDroppedTap;
        const T v = static_cast<T>(A(0) + static_cast<A>(gp[o]));
        row0[2 * ow] = t == 0 ? v : T(0);
        row0[2 * ow + 1] = t == 1 ? v : T(0);
        row1[2 * ow] = t == 2 ? v : T(0);
        row1[2 * ow + 1] = t == 3 ? v : T(0);
      }
      if (w > 2 * g.ow) row0[w - 1] = row1[w - 1] = T(0);  // an odd width's last column is in no window
    }
    if (g.h > 2 * g.oh) std::fill(gxp + (g.h - 1) * w, gxp + g.h * w, T(0));  // an odd height's last row
  }
  return bad == 0;
}

// PyTorch's avg-pool window: [h0, h1) x [w0, w1) clipped to the input, and its divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
AvgWindow avg_window(const PoolGeom& g, bool count_include_pad, int64_t oh, int64_t ow) {
  int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  int64_t h1 = std::min(h0 + g.kh, g.h + g.ph), w1 = std::min(w0 + g.kw, g.w + g.pw);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.h);
  w1 = std::min(w1, g.w);
  return {h0, h1, w0, w1, count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

template <class T>
void avg_pool_impl(const PoolGeom& g, bool cip, const T* x, T* y) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * out_plane * g.kh * g.kw))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * in_plane;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const AvgWindow win = avg_window(g, cip, oh, ow);
        A s = 0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) s += static_cast<A>(xp[ih * g.w + iw]);
        y[pl * out_plane + oh * g.ow + ow] = static_cast<T>(win.divisor > 0 ? s / static_cast<A>(win.divisor) : A(0));
      }
    }
  }
}

template <class T>
void avg_pool_backward_impl(const PoolGeom& g, bool cip, const T* gy, T* gx) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * out_plane * g.kh * g.kw))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    PlaneAcc<T> acc(gx + pl * in_plane, in_plane);
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const AvgWindow win = avg_window(g, cip, oh, ow);
        if (win.divisor <= 0) continue;
        const A v = static_cast<A>(gy[pl * out_plane + oh * g.ow + ow]) / static_cast<A>(win.divisor);
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[ih * g.w + iw] += v;
      }
    }
    acc.finish();
  }
}

// Adaptive window i of `out` over `in`: [floor(i * in / out), ceil((i + 1) * in / out)).
int64_t adaptive_start(int64_t i, int64_t in, int64_t out) {
  return (i * in) / out;
}
int64_t adaptive_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

template <class T>
void adaptive_avg_impl(const PoolGeom& g, const T* x, T* y) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * in_plane))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * in_plane;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      const int64_t h0 = adaptive_start(oh, g.h, g.oh), h1 = adaptive_end(oh, g.h, g.oh);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t w0 = adaptive_start(ow, g.w, g.ow), w1 = adaptive_end(ow, g.w, g.ow);
        A s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += static_cast<A>(xp[ih * g.w + iw]);
        y[pl * out_plane + oh * g.ow + ow] = static_cast<T>(s / static_cast<A>((h1 - h0) * (w1 - w0)));
      }
    }
  }
}

template <class T>
void adaptive_avg_backward_impl(const PoolGeom& g, const T* gy, T* gx) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * in_plane))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    PlaneAcc<T> acc(gx + pl * in_plane, in_plane);
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      const int64_t h0 = adaptive_start(oh, g.h, g.oh), h1 = adaptive_end(oh, g.h, g.oh);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t w0 = adaptive_start(ow, g.w, g.ow), w1 = adaptive_end(ow, g.w, g.ow);
        const A v = static_cast<A>(gy[pl * out_plane + oh * g.ow + ow]) / static_cast<A>((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc[ih * g.w + iw] += v;
      }
    }
    acc.finish();
  }
}

}  // namespace

void max_pool2d(const PoolGeom& g, const Tensor& x, const Tensor& values, const Tensor& indices) {
  visit_float(x.dtype(), x.device(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    max_pool_impl<T>(g, static_cast<const T*>(x.data<T>()), values.data<T>(),
                     ArgmaxOut{.index = indices.data<int64_t>()});
  });
}

void max_pool2d_backward(const PoolGeom& g, const Tensor& gy, const Tensor& indices, const Tensor& gx) {
  visit_float(gy.dtype(), gy.device(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward_impl<T>(g, static_cast<const T*>(gy.data<T>()),
                              static_cast<const int64_t*>(indices.data<int64_t>()), gx.data<T>());
  });
}

void max_pool2d_taps(const PoolGeom& g, const Tensor& x, const Tensor& values, const Tensor& taps,
                     bool drop_nonpositive) {
  visit_float(x.dtype(), x.device(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    max_pool_impl<T>(g, static_cast<const T*>(x.data<T>()), values.data<T>(),
                     ArgmaxOut{.tap = taps.data<uint8_t>(), .drop = drop_nonpositive});
  });
}

bool max_pool2d_taps_backward(const PoolGeom& g, const Tensor& gy, const Tensor& taps, const Tensor& gx) {
  const bool disjoint = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 &&
                        g.dw == 1 && g.oh == g.h / 2 && g.ow == g.w / 2;
  return visit_float(gy.dtype(), gy.device(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gyp = gy.data<T>();
    const uint8_t* tp = taps.data<uint8_t>();
    return disjoint ? max_pool_taps_backward_2x2_impl<T>(g, gyp, tp, gx.data<T>())
                    : max_pool_taps_backward_impl<T>(g, gyp, tp, gx.data<T>());
  });
}

bool max_pool2d_backward_disjoint(const PoolGeom& g, const Tensor& gy, const Tensor& indices, const Tensor& gx) {
#if defined(__AVX512F__)
  if (gy.dtype() != DType::F32 || g.oh != g.h / 2 || g.ow != g.w / 2 || g.oh <= 0 || g.ow <= 0) return false;
  const float* gyp = gy.data<float>();
  const int64_t* idx = indices.data<int64_t>();
  float* gxp = gx.data<float>();
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  int failed = 0;
#pragma omp parallel for schedule(static) reduction(| : failed) if (worth_parallel(g.planes * in_plane))
  for (int64_t pl = 0; pl < g.planes; ++pl)
    if (!failed)
      failed |= !max_pool_2x2_backward_plane_avx512(gyp + pl * out_plane, idx + pl * out_plane, g.h, g.w, g.oh, g.ow,
                                                    gxp + pl * in_plane);
  return !failed;
#else
  (void)g, (void)gy, (void)indices, (void)gx;
  return false;
#endif
}

void avg_pool2d(const PoolGeom& g, bool count_include_pad, const Tensor& x, const Tensor& y) {
  visit_float(x.dtype(), x.device(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_impl<T>(g, count_include_pad, static_cast<const T*>(x.data<T>()), y.data<T>());
  });
}

void avg_pool2d_backward(const PoolGeom& g, bool count_include_pad, const Tensor& gy, const Tensor& gx) {
  visit_float(gy.dtype(), gy.device(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_backward_impl<T>(g, count_include_pad, static_cast<const T*>(gy.data<T>()), gx.data<T>());
  });
}

void adaptive_avg_pool2d(const PoolGeom& g, const Tensor& x, const Tensor& y) {
  visit_float(x.dtype(), x.device(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg_impl<T>(g, static_cast<const T*>(x.data<T>()), y.data<T>());
  });
}

void adaptive_avg_pool2d_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx) {
  visit_float(gy.dtype(), gy.device(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg_backward_impl<T>(g, static_cast<const T*>(gy.data<T>()), gx.data<T>());
  });
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
