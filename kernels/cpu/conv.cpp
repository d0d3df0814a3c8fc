// CPU conv2d: im2col + Eigen GEMM per image, the batch split over OpenMP threads. Every output
// element is written by one single-threaded GEMM in a fixed order. The weight gradient sums over
// the batch: the images are grouped into chunks fixed by the batch size (never by the thread
// count), each chunk accumulates its images in order into its own partial, and the partials are
// added in chunk order, so the result is the same on any number of threads.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "brisk/util/error.h"
#include "cpu/conv_cpu.h"
#include "cpu/linalg_kernels.h"
#include "cpu/scratch.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {
namespace {

// c (m x n) = or += op(a) * op(b), all row-major with leading dims; op transposes when ta / tb.
// Runs on the calling thread (inside our own parallel regions).
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc, bool accumulate) {
  gemm_serial(ta, tb, m, n, k, T(1), a, lda, b, ldb, accumulate ? T(1) : T(0), c, ldc);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A 1x1, stride-1, unpadded conv reads the image itself as its column matrix.
bool is_pointwise(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// For kernel column j: the output columns [ow0, ow1) whose input column ow * sw + off lies
// inside [0, W); off = j * dw - pw.
struct ColRange {
  int64_t off, ow0, ow1;
};
ColRange col_range(const ConvGeom& g, int64_t j) {
  const int64_t off = j * g.dw - g.pw;
  const int64_t ow0 = std::min(g.ow, off >= 0 ? 0 : ceil_div(-off, g.sw));
  const int64_t ow1 = g.w - off <= 0 ? 0 : std::min(g.ow, ceil_div(g.w - off, g.sw));
  return {off, ow0, std::max(ow0, ow1)};
}

// x: (C_in, H, W) of one image -> cols: (C_in * kH * kW, OH * OW), zeros where the window
// reads padding.
template <class T>
void im2col(const ConvGeom& g, const T* x, T* cols) {
  const int64_t p = g.oh * g.ow, ow = g.ow, sw = g.sw;
  for (int64_t c = 0; c < g.c_in; ++c) {
    const T* xc = x + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        const ColRange r = col_range(g, j);
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          T* out = row + oh * g.ow;
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) {
            for (int64_t o = 0; o < ow; ++o) out[o] = T(0);
            continue;
          }
          // Rows are short (OW is often 7..28), so inline loops beat memcpy/memset calls.
          const T* __restrict in = xc + ih * g.w + r.off;
          T* __restrict o_ = out;
          for (int64_t o = 0; o < r.ow0; ++o) o_[o] = T(0);
          if (sw == 1) {
#pragma omp simd
            for (int64_t o = r.ow0; o < r.ow1; ++o) o_[o] = in[o];
          } else {
            for (int64_t o = r.ow0; o < r.ow1; ++o) o_[o] = in[o * sw];
          }
          for (int64_t o = r.ow1; o < ow; ++o) o_[o] = T(0);
        }
      }
    }
  }
}

// The adjoint of im2col: dx (C_in, H, W) = sum of cols entries over the positions they read.
// dx must be zeroed first.
template <class T>
void col2im(const ConvGeom& g, const T* cols, T* dx) {
  const int64_t p = g.oh * g.ow, sw = g.sw;
  for (int64_t c = 0; c < g.c_in; ++c) {
    T* xc = dx + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        const ColRange r = col_range(g, j);
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          const T* __restrict in = row + oh * g.ow;
          T* __restrict out = xc + ih * g.w + r.off;
          if (sw == 1) {
#pragma omp simd
            for (int64_t o = r.ow0; o < r.ow1; ++o) out[o] += in[o];
          } else {
            for (int64_t o = r.ow0; o < r.ow1; ++o) out[o * sw] += in[o];
          }
        }
      }
    }
  }
}

// The "same width" stride-1 case (OW == W, e.g. 3x3 with padding 1): for one kernel tap
// (i, j), the column row is the input plane shifted by a constant flat offset, so the valid
// output rows [oh0, oh1) map onto one contiguous input range; only the columns that wrap
// around a row edge (|dw_off| of them per row) need fixing up. Whole-plane loops instead of
// many 7..28-element ones.
bool is_same_width(const ConvGeom& g) {
  return g.sh == 1 && g.sw == 1 && g.ow == g.w;
}

struct TapShift {
  int64_t oh0, oh1;  // output rows that read inside the input
  int64_t base;      // flat input offset read by flat output position oh0 * OW (may be negative)
  int64_t t0, t1;    // the flat range [t0, t1) past oh0 * OW whose reads stay inside the plane
  int64_t dw_off;    // column shift j * dw - pw
};
TapShift tap_shift(const ConvGeom& g, int64_t i, int64_t j) {
  TapShift s{};
  const int64_t dh_off = i * g.dh - g.ph;
  s.dw_off = j * g.dw - g.pw;
  s.oh0 = std::clamp<int64_t>(-dh_off, 0, g.oh);
  s.oh1 = std::clamp<int64_t>(g.h - dh_off, s.oh0, g.oh);
  s.base = (s.oh0 + dh_off) * g.w + s.dw_off;
  s.t0 = std::max<int64_t>(0, -s.dw_off);
  s.t1 = (s.oh1 - s.oh0) * g.ow - std::max<int64_t>(0, s.dw_off);
  return s;
}

// Zeros, in each output row of [oh0, oh1), the columns whose input column wraps past an edge.
template <class T>
inline void zero_wrapped_columns(const ConvGeom& g, const TapShift& s, T* row) {
  const int64_t lo = std::min(g.ow, std::max<int64_t>(0, -s.dw_off));               // [0, lo) read left of the row
  const int64_t hi = std::max<int64_t>(lo, g.ow - std::max<int64_t>(0, s.dw_off));  // [hi, OW) read right of it
  if (lo == 0 && hi == g.ow) return;  // the centre column of taps reads no wrapped column
  for (int64_t oh = s.oh0; oh < s.oh1; ++oh) {
    T* r = row + oh * g.ow;
    for (int64_t o = 0; o < lo; ++o) r[o] = T(0);
    for (int64_t o = hi; o < g.ow; ++o) r[o] = T(0);
  }
}

template <class T>
void im2col_same_width(const ConvGeom& g, const T* x, T* cols) {
  const int64_t p = g.oh * g.ow;
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      const TapShift s = tap_shift(g, i, j);
      for (int64_t c = 0; c < g.c_in; ++c) {
        T* __restrict row = cols + ((c * g.kh + i) * g.kw + j) * p;
        const T* __restrict in = x + c * g.h * g.w + s.base;
        T* __restrict out = row + s.oh0 * g.ow;
        for (int64_t t = 0; t < s.oh0 * g.ow; ++t) row[t] = T(0);
        for (int64_t t = 0; t < std::min(s.t0, (s.oh1 - s.oh0) * g.ow); ++t) out[t] = T(0);
#pragma omp simd
        for (int64_t t = s.t0; t < s.t1; ++t) out[t] = in[t];
        for (int64_t t = std::max(s.t0, s.t1); t < (s.oh1 - s.oh0) * g.ow; ++t) out[t] = T(0);
        for (int64_t t = s.oh1 * g.ow; t < p; ++t) row[t] = T(0);
        zero_wrapped_columns(g, s, row);
      }
    }
  }
}

// The adjoint of im2col_same_width; it clears the wrapped columns of `cols` (scratch) first.
template <class T>
void col2im_same_width(const ConvGeom& g, T* cols, T* dx) {
  const int64_t p = g.oh * g.ow;
  for (int64_t i = 0; i < g.kh; ++i) {
    for (int64_t j = 0; j < g.kw; ++j) {
      const TapShift s = tap_shift(g, i, j);
      for (int64_t c = 0; c < g.c_in; ++c) {
        T* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        zero_wrapped_columns(g, s, row);
        const T* __restrict in = row + s.oh0 * g.ow;
        T* __restrict out = dx + c * g.h * g.w + s.base;
#pragma omp simd
        for (int64_t t = s.t0; t < s.t1; ++t) out[t] += in[t];
      }
    }
  }
}

// Sum of n values in a fixed order: 16 interleaved lanes (so the adds vectorise without
// reassociation by the compiler), then the lanes in order.
template <class T>
double row_sum(const T* v, int64_t n) {
  constexpr int64_t kLanes = 16;
  T lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += v[i + l];
  double s = 0;
  for (int64_t l = 0; l < kLanes; ++l) s += static_cast<double>(lanes[l]);
  for (; i < n; ++i) s += static_cast<double>(v[i]);
  return s;
}

// One image's input to the GEMM: the image itself for a pointwise conv, else its columns
// (written into `cols`, laid out (C_in*kH*kW, OH*OW)).
template <class T>
const T* lower_to_columns(const ConvGeom& g, const T* xn, T* cols) {
  if (is_pointwise(g)) return xn;
  if (is_same_width(g)) {
    im2col_same_width(g, xn, cols);
  } else {
    im2col(g, xn, cols);
  }
  return cols;
}

// The calling thread's column matrix of `col_size` elements: its own scratch memory, which stays
// in its core's caches from call to call (cpu/scratch.cpp); nullptr, with `failed` set, when
// memory runs out, and for a pointwise conv, which needs none.
template <class T>
T* column_scratch(int64_t col_size, int& failed) {
  if (col_size == 0) return nullptr;
  T* cols = static_cast<T*>(thread_scratch(static_cast<size_t>(col_size) * sizeof(T)));
  if (cols == nullptr) failed = 1;
  return cols;
}

void check_column_scratch(const char* op, int failed, int64_t bytes) {
  BRISK_CHECK(!failed, op, ": out of memory for a thread's column matrix (", bytes,
              " bytes); use fewer threads or a smaller input");
}

template <class T>
void conv2d_forward_impl(const ConvGeom& g, const T* x, const T* w, const T* b, T* y) {
  const int64_t p = g.oh * g.ow;
  const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups, k = cin_g * g.kh * g.kw;
  const bool direct = is_pointwise(g);
  const int64_t col_size = direct ? 0 : g.c_in * g.kh * g.kw * p;
  int failed = 0;
#pragma omp parallel reduction(| : failed)
  {
    T* cols = column_scratch<T>(col_size, failed);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      if (failed) continue;
      const T* xn = x + n * g.c_in * g.h * g.w;
      T* yn = y + n * g.c_out * p;
      const T* src = lower_to_columns(g, xn, cols);
      if (b != nullptr) {
        for (int64_t oc = 0; oc < g.c_out; ++oc) std::fill(yn + oc * p, yn + (oc + 1) * p, b[oc]);
      }
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        gemm(false, false, cout_g, p, k, w + grp * cout_g * k, k, src + grp * k * p, p, yn + grp * cout_g * p, p,
             b != nullptr);
      }
    }
  }
  check_column_scratch("conv2d", failed, col_size * static_cast<int64_t>(sizeof(T)));
}

// How many partial weight gradients the batch is summed into: up to kWeightGradChunks (enough
// to keep 2, 4, 8 or 16 threads busy), fewer when the partials would take more than
// kWeightGradBytes. A function of the sizes only.
constexpr int64_t kWeightGradChunks = 16;
constexpr int64_t kWeightGradBytes = int64_t{64} << 20;
int64_t weight_grad_chunks(int64_t n, int64_t w_bytes) {
  const int64_t fit = std::max<int64_t>(1, kWeightGradBytes / std::max<int64_t>(w_bytes, 1));
  return std::max<int64_t>(1, std::min({n, kWeightGradChunks, fit}));
}

template <class T>
void conv2d_backward_impl(const ConvGeom& g, const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb) {
  const int64_t p = g.oh * g.ow;
  const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups, k = cin_g * g.kh * g.kw;
  const bool direct = is_pointwise(g), same_width = is_same_width(g);
  const int64_t col_size = direct ? 0 : g.c_in * g.kh * g.kw * p;
  const int64_t w_size = g.c_out * k;
  // Images [n * c / chunks, n * (c + 1) / chunks) form chunk c; without a weight gradient every
  // image is its own chunk.
  const int64_t chunks = gw != nullptr ? weight_grad_chunks(g.n, w_size * static_cast<int64_t>(sizeof(T))) : g.n;
  // A column matrix per thread (its scratch), and a partial weight gradient per chunk, stored
  // transposed per group (K x cout_g): with the column matrix as the GEMM's left operand Eigen
  // packs it without a transpose, which is the expensive part of this GEMM's packing.
  const int64_t parts_size = gw != nullptr ? chunks * w_size : 0;
  Tensor ws = empty({std::max<int64_t>(1, parts_size)}, dtype_of_v<T>);
  T* parts = static_cast<T*>(ws.data_ptr());

  if ((gx != nullptr || gw != nullptr) && g.n > 0) {
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
      T* cols = column_scratch<T>(col_size, failed);
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        if (failed) continue;
        const int64_t n0 = g.n * c / chunks, n1 = g.n * (c + 1) / chunks;
        T* part = parts + c * w_size;
        for (int64_t n = n0; n < n1; ++n) {
          const T* xn = x + n * g.c_in * g.h * g.w;
          const T* gyn = gy + n * g.c_out * p;
          if (gw != nullptr) {
            // part_g += gy_g (cout_g x P) * cols_g^T (P x K), stored as cols_g (K x P) * gy_g^T
            const T* src = lower_to_columns(g, xn, cols);
            for (int64_t grp = 0; grp < g.groups; ++grp) {
              gemm(false, true, k, cout_g, p, src + grp * k * p, p, gyn + grp * cout_g * p, p, part + grp * cout_g * k,
                   cout_g, n != n0);
            }
          }
          if (gx != nullptr) {
            // dcols_g (K x P) = w_g^T (K x cout_g) * gy_g (cout_g x P), then folded back onto the image.
            T* gxn = gx + n * g.c_in * g.h * g.w;
            T* dst = direct ? gxn : cols;
            for (int64_t grp = 0; grp < g.groups; ++grp) {
              gemm(true, false, k, p, cout_g, w + grp * cout_g * k, k, gyn + grp * cout_g * p, p, dst + grp * k * p, p,
                   false);
            }
            if (!direct) {
              std::memset(gxn, 0, static_cast<size_t>(g.c_in * g.h * g.w) * sizeof(T));
              if (same_width) {
                col2im_same_width(g, cols, gxn);
              } else {
                col2im(g, cols, gxn);
              }
            }
          }
        }
      }
    }
    check_column_scratch("conv2d_backward", failed, col_size * static_cast<int64_t>(sizeof(T)));
  }
  if (gw != nullptr) {
    // gw[grp][co][kk] = the partials part[c][grp][kk][co] added in chunk order.
#pragma omp parallel for schedule(static) if (w_size * chunks > 65536)
    for (int64_t row = 0; row < g.c_out; ++row) {
      const int64_t grp = row / cout_g, co = row % cout_g;
      T* out = gw + row * k;
      if (g.n == 0) {
        std::fill(out, out + k, T(0));
        continue;
      }
      for (int64_t kk = 0; kk < k; ++kk) {
        const T* src = parts + grp * cout_g * k + kk * cout_g + co;
        T s = src[0];
        for (int64_t c = 1; c < chunks; ++c) s += src[c * w_size];
        out[kk] = s;
      }
    }
  }
  if (gb != nullptr) {
#pragma omp parallel for schedule(static)
    for (int64_t oc = 0; oc < g.c_out; ++oc) {
      double s = 0;
      for (int64_t n = 0; n < g.n; ++n) s += row_sum(gy + (n * g.c_out + oc) * p, p);
      gb[oc] = static_cast<T>(s);
    }
  }
}

template <class T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

}  // namespace

void conv2d(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  if (x.dtype() == DType::F64) {
    conv2d_forward_impl<double>(g, ptr_or_null<double>(x), ptr_or_null<double>(w), ptr_or_null<double>(b),
                                ptr_or_null<double>(y));
  } else {
    conv2d_forward_impl<float>(g, ptr_or_null<float>(x), ptr_or_null<float>(w), ptr_or_null<float>(b),
                               ptr_or_null<float>(y));
  }
}

void conv2d_backward(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx,
                     const Tensor& gw, const Tensor& gb) {
  if (gy.dtype() == DType::F64) {
    conv2d_backward_impl<double>(g, ptr_or_null<double>(gy), ptr_or_null<double>(x), ptr_or_null<double>(w),
                                 ptr_or_null<double>(gx), ptr_or_null<double>(gw), ptr_or_null<double>(gb));
  } else {
    conv2d_backward_impl<float>(g, ptr_or_null<float>(gy), ptr_or_null<float>(x), ptr_or_null<float>(w),
                                ptr_or_null<float>(gx), ptr_or_null<float>(gw), ptr_or_null<float>(gb));
  }
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
