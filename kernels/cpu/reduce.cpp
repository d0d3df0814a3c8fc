// CPU reductions (sum, mean, prod, amax/amin, max/min with indices, argmax/argmin, var/std,
// logsumexp) over any set of dims. The input is never copied: kept and reduced dims are read
// through their strides, and each output element is reduced in a fixed order, so results do not
// depend on the OpenMP thread count: by one thread, or, for long contiguous runs (a sum over a
// whole large tensor), in fixed chunks of kReduceChunk elements whose results are folded in
// chunk order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/strided.h"
#include "cpu/reduce_common.h"
#include "cpu/reduce_kernels.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

namespace {

// Where the reduction reads: kept dims and reduced dims, each coalesced (size-1 dims dropped,
// adjacent dims merged when their strides allow), with the input's strides.
struct ReduceGeom {
  int64_t n_out = 1, n_red = 1;
  Shape ksz, rsz;
  Strides kst, rst;
};

void coalesce_dims(Shape& sz, Strides& st) {
  Shape s;
  Strides t;
  for (size_t i = 0; i < sz.size(); ++i) {
    if (sz[i] == 1) continue;
    if (!s.empty() && t.back() == st[i] * sz[i]) {
      s.back() *= sz[i];
      t.back() = st[i];
    } else {
      s.push_back(sz[i]);
      t.push_back(st[i]);
    }
  }
  sz = std::move(s);
  st = std::move(t);
}

ReduceGeom make_geom(const Tensor& x, const std::vector<bool>& reduced) {
  ReduceGeom g;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (reduced[d]) {
      g.rsz.push_back(x.size(d));
      g.rst.push_back(x.stride(d));
      g.n_red *= x.size(d);
    } else {
      g.ksz.push_back(x.size(d));
      g.kst.push_back(x.stride(d));
      g.n_out *= x.size(d);
    }
  }
  coalesce_dims(g.ksz, g.kst);
  coalesce_dims(g.rsz, g.rst);
  return g;
}

// Input offset of kept element o, advanced one element at a time (an odometer).
class KeptCursor {
 public:
  KeptCursor(const ReduceGeom& g, int64_t o) : g_(g), idx_(g.ksz.size(), 0) {
    for (size_t d = g.ksz.size(); d-- > 0;) {
      idx_[d] = o % g.ksz[d];
      o /= g.ksz[d];
      off_ += idx_[d] * g.kst[d];
    }
  }
  int64_t offset() const { return off_; }
  void next() {
    for (size_t d = g_.ksz.size(); d-- > 0;) {
      off_ += g_.kst[d];
      if (++idx_[d] < g_.ksz[d]) return;
      off_ -= g_.kst[d] * g_.ksz[d];
      idx_[d] = 0;
    }
  }

 private:
  const ReduceGeom& g_;
  std::vector<int64_t> idx_;
  int64_t off_ = 0;
};

// Calls run(offset, first_r, n, stride) for each innermost run of the reduced dims, in C order;
// first_r is the C-order index (within the reduced dims) of the run's first element.
template <class Run>
void for_each_reduced_run(const ReduceGeom& g, Run&& run) {
  if (g.rsz.empty()) return run(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{1});
  const size_t nd = g.rsz.size();
  const int64_t n = g.rsz.back(), st = g.rst.back();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (int64_t r = 0; r < g.n_red; r += n) {
    run(off, r, n, st);
    for (size_t d = nd - 1; d-- > 0;) {
      off += g.rst[d];
      if (++idx[d] < g.rsz[d]) break;
      off -= g.rst[d] * g.rsz[d];
      idx[d] = 0;
    }
  }
}

// The reduction driver. Op supplies: Acc init(o); step(Acc&, T v, r) for the element with
// reduced index r; store(o, const Acc&); and optionally row(Acc&, const T* p, n) for a
// contiguous run starting at r = 0. Three layouts, same per-output order in the last two:
//  - reduced dims form one contiguous run (reductions over the last dims): op.row per output;
//  - the innermost kept dim is contiguous (e.g. sum over dim 0 of (N, C)): a block of
//    outputs accumulates row after row of the input, with no transposed copy;
//  - anything else: a strided walk per output.
// A contiguous run at least 2 * kReduceChunk long is reduced in chunks of this many elements,
// whatever the thread count (so a sum over one large tensor uses every thread).
constexpr int64_t kReduceChunk = 32768;

template <class T, class Op>
void run_reduce(const ReduceGeom& g, const T* base, const Op& op) {
  using Acc = decltype(op.init(0));
  if (g.n_out == 0) return;
  const int64_t total = g.n_out * std::max<int64_t>(g.n_red, 1);
  const bool par = total >= 2 * kParallelGrain;
  const bool contiguous_run = g.rsz.empty() || (g.rsz.size() == 1 && g.rst[0] == 1);

  if constexpr (requires(Acc & a, const Acc& b) { op.combine(a, b); }) {
    if (contiguous_run && g.n_red >= 2 * kReduceChunk) {
      // Chunk c of output o covers [c * kReduceChunk, (c + 1) * kReduceChunk) of its run; the
      // chunks' accumulators are folded in order.
      const int64_t per = (g.n_red + kReduceChunk - 1) / kReduceChunk, tasks = g.n_out * per;
      std::vector<Acc> part(static_cast<size_t>(tasks));
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t o = t / per, r0 = (t % per) * kReduceChunk, n = std::min(kReduceChunk, g.n_red - r0);
        const T* p = base + KeptCursor(g, o).offset() + r0;
        Acc acc = op.init(o);
        if constexpr (requires { op.row(acc, p, n); }) {
          op.row(acc, p, n);
        } else {
          for (int64_t i = 0; i < n; ++i) op.step(acc, p[i], r0 + i);
        }
        part[static_cast<size_t>(t)] = acc;
      }
      for (int64_t o = 0; o < g.n_out; ++o) {
        Acc acc = part[static_cast<size_t>(o * per)];
        for (int64_t c = 1; c < per; ++c) op.combine(acc, part[static_cast<size_t>(o * per + c)]);
        op.store(o, acc);
      }
      return;
    }
  }
  const bool column = !contiguous_run && !g.ksz.empty() && g.kst.back() == 1 && g.ksz.back() >= 8;

  if (column) {
    constexpr int64_t W = 64;
    const int64_t cols = g.ksz.back(), blocks = (cols + W - 1) / W, tasks = (g.n_out / cols) * blocks;
#pragma omp parallel for schedule(static) if (par && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o0 = (t / blocks) * cols + (t % blocks) * W;
      const int64_t w = std::min(W, cols - (t % blocks) * W);
      const T* p0 = base + KeptCursor(g, o0).offset();
      Acc acc[W];
      for (int64_t j = 0; j < w; ++j) acc[j] = op.init(o0 + j);
      for_each_reduced_run(g, [&](int64_t off, int64_t r0, int64_t n, int64_t st) {
        for (int64_t i = 0; i < n; ++i) {
          const T* p = p0 + off + i * st;
          for (int64_t j = 0; j < w; ++j) op.step(acc[j], p[j], r0 + i);
        }
      });
      for (int64_t j = 0; j < w; ++j) op.store(o0 + j, acc[j]);
    }
    return;
  }

  // One output per iteration; chunks of outputs walk their kept offsets with a cursor.
  const int64_t chunk = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.n_red, 1));
  const int64_t chunks = (g.n_out + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (par && chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t o_end = std::min(g.n_out, (c + 1) * chunk);
    KeptCursor cur(g, c * chunk);
    for (int64_t o = c * chunk; o < o_end; ++o, cur.next()) {
      // An empty reduction reads nothing, and its input may have no storage at all.
      const T* p0 = g.n_red > 0 ? base + cur.offset() : base;
      Acc acc = op.init(o);
      if (contiguous_run && g.n_red > 0) {
        if constexpr (requires { op.row(acc, p0, g.n_red); }) {
          op.row(acc, p0, g.n_red);
        } else {
          for (int64_t i = 0; i < g.n_red; ++i) op.step(acc, p0[i], i);
        }
      } else if (g.n_red > 0) {
        for_each_reduced_run(g, [&](int64_t off, int64_t r0, int64_t n, int64_t st) {
          for (int64_t i = 0; i < n; ++i) op.step(acc, p0[off + i * st], r0 + i);
        });
      }
      op.store(o, acc);
    }
  }
}

// --- ops -----------------------------------------------------------------------------------

// sum (or mean when `divide`): S accumulators, 8 independent lanes on contiguous runs.
template <class T, class O>
struct SumOp {
  using S = sum_acc_t<T>;
  O* out;
  bool divide;
  int64_t n;
  S init(int64_t) const { return S(0); }
  void step(S& a, T v, int64_t) const { a += load<S>(v); }
  void row(S& a, const T* p, int64_t len) const { a += sum_lanes<S>(p, len); }
  void combine(S& a, const S& b) const { a += b; }
  void store(int64_t o, S a) const {
    if (divide) a /= static_cast<S>(n);
    out[o] = static_cast<O>(a);
  }
};

template <class T, class O>
struct ProdOp {
  using S = sum_acc_t<T>;
  O* out;
  S init(int64_t) const { return S(1); }
  void step(S& a, T v, int64_t) const { a *= load<S>(v); }
  void combine(S& a, const S& b) const { a *= b; }
  void store(int64_t o, S a) const { out[o] = static_cast<O>(a); }
};

template <class A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return std::isnan(v);
  else
    return false;
}

// amax/amin; a NaN anywhere makes the result NaN.
template <class T, class O, bool Max>
struct ExtremeOp {
  using A = acc_t<T>;
  O* out;
  A init(int64_t) const {
    if constexpr (std::is_floating_point_v<A>)
      return Max ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    else
      return Max ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  }
  static bool better(A v, A a) { return Max ? v > a : v < a; }
  void step(A& a, T t, int64_t) const {
    const A v = load<A>(t);
    if (better(v, a) || is_nan(v)) a = v;
  }
  void row(A& a, const T* p, int64_t n) const {
    constexpr int L = 8;
    A lane[L];
    bool nan = false;
    for (int l = 0; l < L; ++l) lane[l] = a;
    int64_t i = 0;
    for (; i + L <= n; i += L)
      for (int l = 0; l < L; ++l) {
        const A v = load<A>(p[i + l]);
        lane[l] = better(v, lane[l]) ? v : lane[l];
        nan |= is_nan(v);
      }
    for (; i < n; ++i) step(a, p[i], i);
    for (int l = 0; l < L; ++l) a = better(lane[l], a) ? lane[l] : a;
    if (nan) a = std::numeric_limits<A>::quiet_NaN();
  }
  void combine(A& a, const A& b) const {
    if (better(b, a) || is_nan(b)) a = b;
  }
  void store(int64_t o, A a) const { out[o] = static_cast<O>(a); }
};

// max/min with the index of the first occurrence (first NaN wins); values may be null (argmax).
template <class T, bool Max>
struct ArgExtremeOp {
  using A = acc_t<T>;
  struct Acc {
    A v;
    int64_t i;
  };
  T* values;
  int64_t* indices;
  Acc init(int64_t) const { return {A(0), -1}; }
  void step(Acc& a, T t, int64_t r) const {
    const A v = load<A>(t);
    if (a.i < 0 || (Max ? v > a.v : v < a.v) || (is_nan(v) && !is_nan(a.v))) a = {v, r};
  }
  void store(int64_t o, const Acc& a) const {
    if (values) values[o] = static_cast<T>(a.v);
    indices[o] = a.i;
  }
};

// Second pass of var/std: squared deviations from the per-output mean.
template <class T>
struct SquaredDevOp {
  using S = sum_acc_t<T>;
  struct Acc {
    S mean, ss;
  };
  const double* means;
  T* out;
  double denom;
  bool take_sqrt;
  Acc init(int64_t o) const { return {static_cast<S>(means[o]), S(0)}; }
  void step(Acc& a, T t, int64_t) const {
    const S d = load<S>(t) - a.mean;
    a.ss += d * d;
  }
  void row(Acc& a, const T* p, int64_t n) const {
    constexpr int L = 8;
    S lane[L] = {};
    int64_t i = 0;
    for (; i + L <= n; i += L)
      for (int l = 0; l < L; ++l) {
        const S d = load<S>(p[i + l]) - a.mean;
        lane[l] += d * d;
      }
    for (int l = 0; l < L; ++l) a.ss += lane[l];
    for (; i < n; ++i) step(a, p[i], i);
  }
  void combine(Acc& a, const Acc& b) const { a.ss += b.ss; }
  void store(int64_t o, const Acc& a) const {
    const double v = static_cast<double>(a.ss) / denom;
    out[o] = static_cast<T>(take_sqrt ? std::sqrt(v) : v);
  }
};

// Second pass of logsumexp: sum of exp(x - max) (max taken as 0 when infinite, so that all
// -inf gives -inf and any +inf gives +inf).
template <class T>
struct SumExpOp {
  using A = acc_t<T>;
  using S = sum_acc_t<T>;
  struct Acc {
    A m;
    S s;
  };
  const A* maxes;
  T* out;
  Acc init(int64_t o) const { return {std::isinf(maxes[o]) ? A(0) : maxes[o], S(0)}; }
  void step(Acc& a, T t, int64_t) const { a.s += static_cast<S>(fast_exp(load<A>(t) - a.m)); }
  void combine(Acc& a, const Acc& b) const { a.s += b.s; }
  void store(int64_t o, const Acc& a) const { out[o] = static_cast<T>(std::log(a.s) + static_cast<S>(a.m)); }
};

}  // namespace

void sum(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  const ReduceGeom g = make_geom(x, reduced);
  visit_all(x.dtype(), x.device(), "sum", [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<std::is_floating_point_v<acc_t<T>>, T, int64_t>;
    run_reduce(g, static_cast<const T*>(x.data_ptr()), SumOp<T, O>{static_cast<O*>(out.data_ptr()), false, g.n_red});
  });
}

void mean(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  const ReduceGeom g = make_geom(x, reduced);
  visit_float(x.dtype(), x.device(), "mean", [&](auto tag) {
    using T = decltype(tag);
    run_reduce(g, static_cast<const T*>(x.data_ptr()), SumOp<T, T>{static_cast<T*>(out.data_ptr()), true, g.n_red});
  });
}

void prod(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  const ReduceGeom g = make_geom(x, reduced);
  visit_all(x.dtype(), x.device(), "prod", [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<std::is_floating_point_v<acc_t<T>>, T, int64_t>;
    run_reduce(g, static_cast<const T*>(x.data_ptr()), ProdOp<T, O>{static_cast<O*>(out.data_ptr())});
  });
}

namespace {

template <bool Max>
void extreme(const char* op, const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  const ReduceGeom g = make_geom(x, reduced);
  visit_numeric(x.dtype(), x.device(), op, [&](auto tag) {
    using T = decltype(tag);
    run_reduce(g, static_cast<const T*>(x.data_ptr()), ExtremeOp<T, T, Max>{static_cast<T*>(out.data_ptr())});
  });
}

template <bool Max>
void arg_extreme_impl(const char* op, const Tensor& x, const std::vector<bool>& reduced, const Tensor& values,
                      const Tensor& indices) {
  const ReduceGeom g = make_geom(x, reduced);
  visit_numeric(x.dtype(), x.device(), op, [&](auto tag) {
    using T = decltype(tag);
    T* vals = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
    run_reduce(g, static_cast<const T*>(x.data_ptr()),
               ArgExtremeOp<T, Max>{vals, static_cast<int64_t*>(indices.data_ptr())});
  });
}

}  // namespace

void amax(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  extreme<true>("amax", x, reduced, out);
}
void amin(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  extreme<false>("amin", x, reduced, out);
}

void arg_extreme(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool is_max, const Tensor& values,
                 const Tensor& indices) {
  if (is_max)
    arg_extreme_impl<true>(op, x, reduced, values, indices);
  else
    arg_extreme_impl<false>(op, x, reduced, values, indices);
}

void var(const Tensor& x, const std::vector<bool>& reduced, int64_t correction, bool take_sqrt, const Tensor& out) {
  const ReduceGeom g = make_geom(x, reduced);
  std::vector<double> means(static_cast<size_t>(g.n_out));
  const double denom = static_cast<double>(std::max<int64_t>(0, g.n_red - correction));
  visit_float(x.dtype(), x.device(), take_sqrt ? "std" : "var", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.data_ptr());
    run_reduce(g, src, SumOp<T, double>{means.data(), true, g.n_red});
    run_reduce(g, src, SquaredDevOp<T>{means.data(), static_cast<T*>(out.data_ptr()), denom, take_sqrt});
  });
}

void logsumexp(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  const ReduceGeom g = make_geom(x, reduced);
  visit_float(x.dtype(), x.device(), "logsumexp", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* src = static_cast<const T*>(x.data_ptr());
    std::vector<A> maxes(static_cast<size_t>(g.n_out));
    if (g.n_red > 0)
      run_reduce(g, src, ExtremeOp<T, A, true>{maxes.data()});
    else
      std::fill(maxes.begin(), maxes.end(), -std::numeric_limits<A>::infinity());
    run_reduce(g, src, SumExpOp<T>{maxes.data(), static_cast<T*>(out.data_ptr())});
  });
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
