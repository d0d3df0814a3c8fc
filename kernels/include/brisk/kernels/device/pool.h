// Per-element index math of conv.h's own CUDA kernels (2-D pooling and the conv bias gradient),
// shared by host and device so the host tests can check it against the CPU kernels. Every
// function reproduces the CPU kernel's order of operations for its element: the max over a
// window in row-major tap order (first maximum wins, a NaN always takes over), window sums in
// row-major order, and gradients gathered per input element from the outputs whose windows
// contain it, in increasing output order (the order in which the CPU's scatter adds them), so
// GPU and CPU agree bit for bit wherever the inputs are the same.
#pragma once
#include <cstdint>
#include <limits>

#include "brisk/core/macros.h"

namespace brisk::kernels::device {

// The sizes of one pooling call over (H, W) planes: input (h, w), output (oh, ow), kernel,
// stride, padding and dilation (as the CPU's PoolGeom, without the plane count).
struct PoolShape {
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};

// Element offsets into an (N, C, H, W) tensor with any strides, addressed by plane = n * C + c.
struct NchwStrides {
  int64_t c = 1;  // channels
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;
  BRISK_HOST_DEVICE int64_t plane(int64_t p) const {
    const int64_t n = p / c;
    return n * sn + (p - n * c) * sc;
  }
  BRISK_HOST_DEVICE int64_t at(int64_t p, int64_t y, int64_t x) const { return plane(p) + y * sh + x * sw; }
};

// --- max pooling ---------------------------------------------------------------------------------

// The first non-negative position start + k * step (k >= 0): the first tap of a window that
// starts in the padding.
BRISK_HOST_DEVICE inline int64_t first_inside(int64_t start, int64_t step) {
  return start >= 0 ? start : start + ((-start + step - 1) / step) * step;
}

template <class A>
struct MaxAt {
  A value;
  int64_t index;  // ih * w + iw within the plane
};

// The maximum of output (oh, ow)'s window and where it is: taps in row-major order, a strictly
// greater value or a NaN takes over (so the first maximum wins and NaN propagates). Starts from
// -inf at the window's first in-bounds position, which is kept when every value is -inf.
// load(ih, iw) returns the input value in the compute type A.
template <class A, class Load>
BRISK_HOST_DEVICE MaxAt<A> max_window(const PoolShape& g, int64_t oh, int64_t ow, const Load& load) {
  const int64_t h_start = oh * g.sh - g.ph, w_start = ow * g.sw - g.pw;
  MaxAt<A> r{-std::numeric_limits<A>::infinity(), first_inside(h_start, g.dh) * g.w + first_inside(w_start, g.dw)};
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t ih = h_start + i * g.dh;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t iw = w_start + j * g.dw;
      if (iw < 0 || iw >= g.w) continue;
      const A v = load(ih, iw);
      if (v > r.value || v != v) {
        r.value = v;
        r.index = ih * g.w + iw;
      }
    }
  }
  return r;
}

// The max-pool backward of one plane runs on one warp, 32 outputs at a time in output order.
// Within a group of 32, the lanes whose outputs point at the same input element (`peers`, a lane
// mask, found with __match_any_sync) are added by the lowest of them, in lane order, onto what
// the element holds: acc[target] = ((acc[target] + v[l0]) + v[l1]) + ..., exactly the CPU's
// sequence of += in output order. vals: the 32 lanes' gradient values.
template <class A>
BRISK_HOST_DEVICE void add_peers_in_order(A* acc, int64_t target, uint32_t peers, const A* vals) {
  A s = acc[target];
  for (int lane = 0; lane < 32; ++lane)
    if (peers & (uint32_t{1} << lane)) s += vals[lane];
  acc[target] = s;
}

// --- average pooling -------------------------------------------------------------------------------

// PyTorch's avg-pool window of output (oh, ow): [h0, h1) x [w0, w1) clipped to the input, and
// the divisor (the padded window's area with count_include_pad, else the clipped one's).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
BRISK_HOST_DEVICE inline AvgWindow avg_window(const PoolShape& g, bool count_include_pad, int64_t oh, int64_t ow) {
  int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  int64_t h1 = h0 + g.kh < g.h + g.ph ? h0 + g.kh : g.h + g.ph;
  int64_t w1 = w0 + g.kw < g.w + g.pw ? w0 + g.kw : g.w + g.pw;
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  h1 = h1 < g.h ? h1 : g.h;
  w1 = w1 < g.w ? w1 : g.w;
  return {h0, h1, w0, w1, count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

// Sum of load(ih, iw) over [h0, h1) x [w0, w1) in row-major order.
template <class A, class Load>
BRISK_HOST_DEVICE A window_sum(int64_t h0, int64_t h1, int64_t w0, int64_t w1, const Load& load) {
  A s = A(0);
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) s += load(ih, iw);
  return s;
}

// Output rows (or columns) [lo, hi] of a stride-s, size-k, padding-p window whose unclipped
// span [o * s - p, o * s - p + k) contains input position i, intersected with [0, n_out).
struct OutRange {
  int64_t lo, hi;  // inclusive; empty when lo > hi
};
BRISK_HOST_DEVICE inline OutRange windows_containing(int64_t i, int64_t k, int64_t s, int64_t p, int64_t n_out) {
  const int64_t lo = i + p < k ? 0 : (i + p - k) / s + 1;
  const int64_t top = (i + p) / s;
  return {lo, top < n_out - 1 ? top : n_out - 1};
}

// d(input)(ih, iw) of avg_pool2d: the sum, in increasing output order, of gy(oh, ow) / divisor
// over the outputs whose windows contain (ih, iw). load_gy(oh, ow) returns gy in type A.
template <class A, class Load>
BRISK_HOST_DEVICE A avg_backward_at(const PoolShape& g, bool count_include_pad, int64_t ih, int64_t iw,
                                    const Load& load_gy) {
  const OutRange rh = windows_containing(ih, g.kh, g.sh, g.ph, g.oh);
  const OutRange rw = windows_containing(iw, g.kw, g.sw, g.pw, g.ow);
  A s = A(0);
  for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
    for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
      const AvgWindow win = avg_window(g, count_include_pad, oh, ow);
      if (win.divisor <= 0 || ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1) continue;
      s += load_gy(oh, ow) / static_cast<A>(win.divisor);
    }
  }
  return s;
}

// --- adaptive average pooling ---------------------------------------------------------------------

// Window i of `out` over `in`: [floor(i * in / out), ceil((i + 1) * in / out)).
BRISK_HOST_DEVICE inline int64_t adaptive_start(int64_t i, int64_t in, int64_t out) {
  return (i * in) / out;
}
BRISK_HOST_DEVICE inline int64_t adaptive_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// Adaptive output (oh, ow)'s average (g.h, g.w, g.oh, g.ow used).
template <class A, class Load>
BRISK_HOST_DEVICE A adaptive_avg_at(const PoolShape& g, int64_t oh, int64_t ow, const Load& load) {
  const int64_t h0 = adaptive_start(oh, g.h, g.oh), h1 = adaptive_end(oh, g.h, g.oh);
  const int64_t w0 = adaptive_start(ow, g.w, g.ow), w1 = adaptive_end(ow, g.w, g.ow);
  return window_sum<A>(h0, h1, w0, w1, load) / static_cast<A>((h1 - h0) * (w1 - w0));
}

// d(input)(ih, iw) of adaptive_avg_pool2d, in increasing output order. The outputs whose windows
// can contain ih lie in [floor(ih * oh / h), ceil((ih + 1) * oh / h)); each is checked exactly.
template <class A, class Load>
BRISK_HOST_DEVICE A adaptive_avg_backward_at(const PoolShape& g, int64_t ih, int64_t iw, const Load& load_gy) {
  const int64_t oh0 = (ih * g.oh) / g.h, oh1_raw = ((ih + 1) * g.oh + g.h - 1) / g.h;
  const int64_t ow0 = (iw * g.ow) / g.w, ow1_raw = ((iw + 1) * g.ow + g.w - 1) / g.w;
  const int64_t oh1 = oh1_raw < g.oh ? oh1_raw : g.oh, ow1 = ow1_raw < g.ow ? ow1_raw : g.ow;
  A s = A(0);
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t h0 = adaptive_start(oh, g.h, g.oh), h1 = adaptive_end(oh, g.h, g.oh);
    if (ih < h0 || ih >= h1) continue;
    for (int64_t ow = ow0; ow < ow1; ++ow) {
      const int64_t w0 = adaptive_start(ow, g.w, g.ow), w1 = adaptive_end(ow, g.w, g.ow);
      if (iw < w0 || iw >= w1) continue;
      s += load_gy(oh, ow) / static_cast<A>((h1 - h0) * (w1 - w0));
    }
  }
  return s;
}

// --- conv bias gradient ----------------------------------------------------------------------------

// db[c] = sum of dy over (N, OH, OW) for dy (N, C, HW) contiguous. Block c reduces channel c:
// thread t of T sums the channel's elements e = t, t + T, t + 2T, ... (of N * HW, sample-major),
// then the block reduces the threads' partial sums (device/reduce.h). The element's offset:
BRISK_HOST_DEVICE inline int64_t channel_element(int64_t e, int64_t c, int64_t channels, int64_t hw) {
  const int64_t n = e / hw;
  return (n * channels + c) * hw + (e - n * hw);
}

}  // namespace brisk::kernels::device
