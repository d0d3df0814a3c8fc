// CPU kernels that work along one dim: softmax, log_softmax (and their backward), cumsum,
// topk, and the scatter that undoes max/min/topk. The tensor is seen as (outer, n, inner),
// contiguous; rows with inner == 1 (the last dim) get a tight contiguous loop, other dims are
// processed as blocks of up to 64 neighbouring columns that walk down the dim together.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/strided.h"
#include "cpu/cpu_kernels.h"
#include "cpu/reduce_common.h"
#include "cpu/reduce_kernels.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

namespace {

constexpr int64_t kLanes = 64;  // columns processed together when the dim is not the last

struct DimGeom {
  int64_t outer = 1, n = 1, inner = 1;
};

DimGeom dim_geom(const Shape& s, int64_t dim) {
  DimGeom g;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) (d < dim ? g.outer : d == dim ? g.n : g.inner) *= s[d];
  return g;
}

// Calls row(offset) for every (outer) row when inner == 1, else col(offset, w) for every block
// of w <= kLanes columns; offsets are in elements of the contiguous (outer, n, inner) layout.
template <class Row, class Col>
void along_dim(const DimGeom& g, Row&& row, Col&& col) {
  const bool par = g.outer * g.n * g.inner >= 2 * kParallelGrain;
  if (g.inner == 1) {
#pragma omp parallel for schedule(static) if (par && g.outer > 1)
    for (int64_t o = 0; o < g.outer; ++o) row(o * g.n);
    return;
  }
  const int64_t blocks = (g.inner + kLanes - 1) / kLanes, tasks = g.outer * blocks;
#pragma omp parallel for schedule(static) if (par && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / blocks, j0 = (t % blocks) * kLanes;
    col(o * g.n * g.inner + j0, std::min(kLanes, g.inner - j0));
  }
}

// Max of a contiguous run (NaN ignored: it poisons the exp pass anyway), 8 lanes.
template <class T, class A = acc_t<T>>
A row_max(const T* p, int64_t n) {
  constexpr int L = 8;
  A lane[L];
  for (int l = 0; l < L; ++l) lane[l] = -std::numeric_limits<A>::infinity();
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) {
      const A v = load<A>(p[i + l]);
      lane[l] = v > lane[l] ? v : lane[l];
    }
  A m = lane[0];
  for (int l = 1; l < L; ++l) m = lane[l] > m ? lane[l] : m;
  for (; i < n; ++i) m = load<A>(p[i]) > m ? load<A>(p[i]) : m;
  return m;
}

// sum over i < n of f(i) (called once per i, in order within each lane), in 8 lanes so that
// the loop vectorises; the lanes are combined in a fixed order.
template <class A, class F>
A lane_sum(int64_t n, F&& f) {
  constexpr int L = 8;
  A lane[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) lane[l] += f(i + l);
  A s = A(0);
  for (int l = 0; l < L; ++l) s += lane[l];
  for (; i < n; ++i) s += f(i);
  return s;
}

template <class T, bool Log>
void softmax_impl(const T* x, T* y, const DimGeom& g) {
  using A = acc_t<T>;
  // f32/f64 outputs hold exp(x - m) between passes; 16-bit ones recompute it rather than
  // re-read a rounded value.
  constexpr bool kStoreExp = !Log && std::is_same_v<T, A>;
  const int64_t n = g.n, st = g.inner;
  along_dim(
      g,
      [&](int64_t off) {
        const T* xr = x + off;
        T* yr = y + off;
        const A m = row_max(xr, n);
        A s;
        if constexpr (kStoreExp) {
          // exp into y first, then sum y: two loops that vectorise, where one loop that both
          // stores and accumulates in lanes did not (the row is in L1 for the second pass).
          for (int64_t i = 0; i < n; ++i) yr[i] = fast_exp(xr[i] - m);
          s = lane_sum<A>(n, [&](int64_t i) { return yr[i]; });
        } else {
          s = lane_sum<A>(n, [&](int64_t i) { return fast_exp(load<A>(xr[i]) - m); });
        }
        if constexpr (Log) {
          // (x - m) - log(s), not x - (m + log(s)): the latter rounds at the logits' magnitude.
          const A ls = std::log(s);
          for (int64_t i = 0; i < n; ++i) yr[i] = static_cast<T>((load<A>(xr[i]) - m) - ls);
        } else if constexpr (kStoreExp) {
          const A inv = A(1) / s;
          for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
        } else {
          const A inv = A(1) / s;
          for (int64_t i = 0; i < n; ++i) yr[i] = static_cast<T>(fast_exp(load<A>(xr[i]) - m) * inv);
        }
      },
      [&](int64_t off, int64_t w) {
        A m[kLanes], s[kLanes];
        for (int64_t j = 0; j < w; ++j) m[j] = -std::numeric_limits<A>::infinity(), s[j] = A(0);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) {
            const A v = load<A>(x[off + i * st + j]);
            m[j] = v > m[j] ? v : m[j];
          }
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) {
            const A e = fast_exp(load<A>(x[off + i * st + j]) - m[j]);
            if constexpr (kStoreExp) y[off + i * st + j] = e;
            s[j] += e;
          }
        for (int64_t j = 0; j < w; ++j) s[j] = Log ? std::log(s[j]) : A(1) / s[j];
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) {
            const int64_t k = off + i * st + j;
            if constexpr (kStoreExp)
              y[k] *= s[j];
            else if constexpr (Log)
              y[k] = static_cast<T>((load<A>(x[k]) - m[j]) - s[j]);
            else
              y[k] = static_cast<T>(fast_exp(load<A>(x[k]) - m[j]) * s[j]);
          }
      });
}

// softmax: dx = y * (g - sum(g * y)); log_softmax: dx = g - exp(y) * sum(g).
template <class T, bool Log>
void softmax_backward_impl(const T* gr, const T* y, T* dx, const DimGeom& g) {
  using A = acc_t<T>;
  const int64_t n = g.n, st = g.inner;
  auto term = [](A gv, A yv) { return Log ? gv : gv * yv; };
  auto grad = [](A gv, A yv, A s) { return Log ? gv - fast_exp(yv) * s : yv * (gv - s); };
  along_dim(
      g,
      [&](int64_t off) {
        const A s = lane_sum<A>(n, [&](int64_t i) { return term(load<A>(gr[off + i]), load<A>(y[off + i])); });
        for (int64_t i = 0; i < n; ++i)
          dx[off + i] = static_cast<T>(grad(load<A>(gr[off + i]), load<A>(y[off + i]), s));
      },
      [&](int64_t off, int64_t w) {
        A s[kLanes] = {};
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) {
            const int64_t k = off + i * st + j;
            s[j] += term(load<A>(gr[k]), load<A>(y[k]));
          }
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) {
            const int64_t k = off + i * st + j;
            dx[k] = static_cast<T>(grad(load<A>(gr[k]), load<A>(y[k]), s[j]));
          }
      });
}

}  // namespace

void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& y) {
  const DimGeom g = dim_geom(x.sizes(), dim);
  visit_float(x.dtype(), x.device(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data_ptr());
    T* py = static_cast<T*>(y.data_ptr());
    if (log)
      softmax_impl<T, true>(px, py, g);
    else
      softmax_impl<T, false>(px, py, g);
  });
}

void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& dx) {
  const DimGeom g = dim_geom(y.sizes(), dim);
  visit_float(y.dtype(), y.device(), log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pg = static_cast<const T*>(grad.data_ptr());
    const T* py = static_cast<const T*>(y.data_ptr());
    T* pd = static_cast<T*>(dx.data_ptr());
    if (log)
      softmax_backward_impl<T, true>(pg, py, pd, g);
    else
      softmax_backward_impl<T, false>(pg, py, pd, g);
  });
}

void cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& y) {
  const DimGeom g = dim_geom(x.sizes(), dim);
  visit_all(x.dtype(), x.device(), "cumsum", [&](auto tag) {
    using T = decltype(tag);
    using S = sum_acc_t<T>;
    using O = std::conditional_t<std::is_floating_point_v<acc_t<T>>, T, int64_t>;
    const T* px = static_cast<const T*>(x.data_ptr());
    O* py = static_cast<O*>(y.data_ptr());
    const int64_t n = g.n, st = g.inner;
    along_dim(
        g,
        [&](int64_t off) {
          S acc = S(0);
          for (int64_t k = 0; k < n; ++k) {
            const int64_t i = off + (reverse ? n - 1 - k : k);
            acc += load<S>(px[i]);
            py[i] = static_cast<O>(acc);
          }
        },
        [&](int64_t off, int64_t w) {
          S acc[kLanes] = {};
          for (int64_t k = 0; k < n; ++k) {
            const int64_t row = off + (reverse ? n - 1 - k : k) * st;
            for (int64_t j = 0; j < w; ++j) {
              acc[j] += load<S>(px[row + j]);
              py[row + j] = static_cast<O>(acc[j]);
            }
          }
        });
  });
}

void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted, const Tensor& values,
          const Tensor& indices) {
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  const DimGeom g = dim_geom(x.sizes(), dim);
  visit_numeric(x.dtype(), x.device(), "topk", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    using Entry = std::pair<A, int64_t>;
    const T* px = static_cast<const T*>(x.data_ptr());
    T* pv = static_cast<T*>(values.data_ptr());
    int64_t* pi = static_cast<int64_t*>(indices.data_ptr());
    // A strict total order (NaN largest, ties by index), so the selection is deterministic.
    auto before = [largest](const Entry& a, const Entry& b) {
      const bool an = std::isnan(static_cast<double>(a.first)), bn = std::isnan(static_cast<double>(b.first));
      if (an != bn) return largest ? an : bn;
      if (!an && a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
      return a.second < b.second;
    };
    const int64_t rows = g.outer * g.inner;
#pragma omp parallel if (rows * n >= 2 * kParallelGrain && rows > 1)
    {
      std::vector<Entry> buf(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t o = row / g.inner, j = row % g.inner;
        const T* src = px + o * n * g.inner + j;
        if (sorted && k <= 16) {
          // Small k: one pass keeping the best k sorted; most entries lose to the k-th at once.
          int64_t have = 0;
          for (int64_t i = 0; i < n; ++i) {
            const Entry e{load<A>(src[i * g.inner]), i};
            if (have == k) {
              if (k == 0) break;
              const A worst = buf[k - 1].first;
              if (largest ? e.first < worst : e.first > worst) continue;  // the common, cheap rejection
              if (!before(e, buf[k - 1])) continue;
            }
            int64_t pos = have < k ? have++ : k - 1;
            for (; pos > 0 && before(e, buf[pos - 1]); --pos) buf[pos] = buf[pos - 1];
            buf[pos] = e;
          }
        } else {
          for (int64_t i = 0; i < n; ++i) buf[i] = {load<A>(src[i * g.inner]), i};
          if (sorted) {
            std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), before);
          } else {
            if (k < n) std::nth_element(buf.begin(), buf.begin() + k, buf.end(), before);
            std::sort(buf.begin(), buf.begin() + k, [](const Entry& p, const Entry& q) { return p.second < q.second; });
          }
        }
        const int64_t dst = o * k * g.inner + j;
        for (int64_t i = 0; i < k; ++i) {
          pv[dst + i * g.inner] = static_cast<T>(buf[i].first);
          pi[dst + i * g.inner] = buf[i].second;
        }
      }
    }
  });
}

void take_along_dim_backward(const Tensor& grad, const Tensor& indices, int64_t dim, const Tensor& out) {
  const char* op = "take_along_dim_backward";
  fill(out, 0.0);
  if (out.numel() == 0) return;
  const DimGeom gi = dim_geom(grad.sizes(), dim), go = dim_geom(out.sizes(), dim);
  const Shape& in_sizes = out.sizes();
  visit_float(grad.dtype(), grad.device(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* pg = static_cast<const T*>(grad.data_ptr());
    const int64_t* pi = static_cast<const int64_t*>(indices.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    bool bad = false;
    // Each outer slab is written by one thread, in order: deterministic even with repeated indices.
#pragma omp parallel for schedule(static) reduction(|| : bad) if (grad.numel() >= 2 * kParallelGrain)
    for (int64_t o = 0; o < gi.outer; ++o)
      for (int64_t i = 0; i < gi.n; ++i)
        for (int64_t j = 0; j < gi.inner; ++j) {
          const int64_t src = (o * gi.n + i) * gi.inner + j, idx = pi[src];
          if (idx < 0 || idx >= go.n) {
            bad = true;
            continue;
          }
          T& dst = po[(o * go.n + idx) * go.inner + j];
          dst = static_cast<T>(load<acc_t<T>>(dst) + load<acc_t<T>>(pg[src]));
        }
    BRISK_CHECK(!bad, op, ": an index is out of range for dim ", dim, " of input shape ", in_sizes);
  });
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
