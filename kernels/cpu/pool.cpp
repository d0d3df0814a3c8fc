// CPU pooling: max (with argmax indices), average and adaptive average, forward and backward.
// Work is split over (N * C) planes; each plane is handled by one thread, so results never
// depend on the thread count. f16/bf16 load, compute in f32, store.
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

// The CNN's common case, 2x2 windows with stride 2 and no padding: straight-line, branch-free.
template <class T>
void max_pool_2x2_impl(const PoolGeom& g, const T* x, T* y, int64_t* idx) {
  using A = acc_t<T>;
  const int64_t w = g.w, oh_n = g.oh, ow_n = g.ow, in_plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for schedule(static) if (worth_parallel(g.planes * out_plane * 4))
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * in_plane;
    T* yp = y + pl * out_plane;
    int64_t* ip = idx + pl * out_plane;
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      const int64_t b0 = 2 * oh * w, b1 = b0 + w;
      const T* r0 = xp + b0;
      const T* r1 = xp + b1;
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const int64_t c = 2 * ow;
        A best = static_cast<A>(r0[c]);
        int64_t bi = b0 + c;
        max_step(static_cast<A>(r0[c + 1]), b0 + c + 1, best, bi);
        max_step(static_cast<A>(r1[c]), b1 + c, best, bi);
        max_step(static_cast<A>(r1[c + 1]), b1 + c + 1, best, bi);
        yp[oh * ow_n + ow] = static_cast<T>(best);
        ip[oh * ow_n + ow] = bi;
      }
    }
  }
}

template <class T>
void max_pool_impl(const PoolGeom& g, const T* x, T* y, int64_t* idx) {
  using A = acc_t<T>;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  if (g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 &&
      2 * g.oh <= g.h && 2 * g.ow <= g.w) {  // (ceil_mode may add a partial last window)
    max_pool_2x2_impl(g, x, y, idx);
    return;
  }
#pragma omp parallel if (worth_parallel(g.planes * out_plane * g.kh * g.kw))
  {
    std::vector<A> best_row(static_cast<size_t>(g.ow));
    A* best = best_row.data();
    std::vector<TapRange> taps;  // per kernel column, computed once (integer divisions are slow)
    for (int64_t j = 0; j < g.kw; ++j) taps.push_back(tap_range(g, j));
#pragma omp for schedule(static)
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      const T* xp = x + pl * in_plane;
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        T* yr = y + pl * out_plane + oh * g.ow;
        int64_t* ir = idx + pl * out_plane + oh * g.ow;
        int64_t h0 = oh * g.sh - g.ph;
        while (h0 < 0) h0 += g.dh;
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          int64_t w0 = ow * g.sw - g.pw;
          while (w0 < 0) w0 += g.dw;
          best[ow] = -std::numeric_limits<A>::infinity();
          ir[ow] = h0 * g.w + w0;  // the first in-bounds position, kept if all are -inf
        }
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const TapRange& r = taps[static_cast<size_t>(j)];
            // Locals, so the compiler need not reload g through the aliasing index stores.
            const int64_t sw = g.sw, base = ih * g.w + r.off, ow0 = r.ow0, ow1 = r.ow1;
            const T* in = xp + base;
#pragma omp simd
            for (int64_t ow = ow0; ow < ow1; ++ow) {
              const A v = static_cast<A>(in[ow * sw]);
              const bool take = v > best[ow] || v != v;
              best[ow] = take ? v : best[ow];
              ir[ow] = take ? base + ow * sw : ir[ow];
            }
          }
        }
        for (int64_t ow = 0; ow < g.ow; ++ow) yr[ow] = static_cast<T>(best[ow]);
      }
    }
  }
}

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
    max_pool_impl<T>(g, static_cast<const T*>(x.data<T>()), values.data<T>(), indices.data<int64_t>());
  });
}

void max_pool2d_backward(const PoolGeom& g, const Tensor& gy, const Tensor& indices, const Tensor& gx) {
  visit_float(gy.dtype(), gy.device(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward_impl<T>(g, static_cast<const T*>(gy.data<T>()),
                              static_cast<const int64_t*>(indices.data<int64_t>()), gx.data<T>());
  });
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
