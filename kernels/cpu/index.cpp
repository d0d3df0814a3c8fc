// CPU indexing loops. Parallel loops split work only across disjoint output slices, and every
// accumulation into one output element runs in index order, so results never depend on the
// thread count.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "brisk/core/rng.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/strided.h"
#include "cpu/index_cpu.h"

namespace brisk::kernels::cpu {

namespace {

// (pre, D, post) of a contiguous tensor split around `dim`.
struct Split3 {
  int64_t pre = 1, mid = 1, post = 1;
};
Split3 split_around(const Shape& s, int64_t dim) {
  Split3 r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) (d < dim ? r.pre : d == dim ? r.mid : r.post) *= s[d];
  return r;
}

// The sizes of `s` without `dim`, and each operand's strides on those dims.
template <int N>
struct Rows {
  Shape outer;
  std::array<Strides, N> strides;
  int64_t count = 1;
};
template <int N>
Rows<N> rows_without(const Shape& s, int64_t dim, const std::array<const Strides*, N>& st) {
  Rows<N> r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d == dim) continue;
    r.outer.push_back(s[d]);
    r.count *= s[d];
    for (int k = 0; k < N; ++k) r.strides[k].push_back((*st[k])[d]);
  }
  return r;
}
// Element offsets of row r (C order over rows.outer) for each operand.
template <int N>
std::array<int64_t, N> row_offsets(const Rows<N>& rows, int64_t r) {
  std::array<int64_t, N> off{};
  for (int64_t d = static_cast<int64_t>(rows.outer.size()) - 1; d >= 0; --d) {
    const int64_t c = r % rows.outer[d];
    r /= rows.outer[d];
    for (int k = 0; k < N; ++k) off[k] += c * rows.strides[k][d];
  }
  return off;
}

}  // namespace

void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  const Split3 s = split_around(x.sizes(), dim);
  const int64_t n = idx.numel();
  const int64_t* ip = idx.data<int64_t>();
  const size_t es = x.element_size();
  const size_t row_bytes = static_cast<size_t>(s.post) * es;
  const char* xp = static_cast<const char*>(x.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  const int64_t tasks = s.pre * n;
  // Whole slices are copied as bytes: no dtype dispatch needed. Split over threads from one grain
  // up (not two, as for arithmetic): a data loader's batch gather (64 images of 784 floats) reads
  // rows that are cold, touched once an epoch, and the threads wait for that memory side by side.
#pragma omp parallel for schedule(static) if (tasks * s.post > kParallelGrain && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t p = t / n, j = t % n;
    std::memcpy(op + static_cast<size_t>(t) * row_bytes, xp + static_cast<size_t>(p * s.mid + ip[j]) * row_bytes,
                row_bytes);
  }
}

void index_add(const Tensor& dst, int64_t dim, const Tensor& idx, const Tensor& src) {
  const Split3 s = split_around(dst.sizes(), dim);
  const int64_t n = idx.numel();
  const int64_t* ip = idx.data<int64_t>();
  // Tasks own disjoint (pre, post-chunk) slices of dst and walk the whole index in order.
  const int64_t chunk = std::min<int64_t>(std::max<int64_t>(s.post, 1), 4096);
  const int64_t nchunks = (s.post + chunk - 1) / chunk;
  const int64_t tasks = s.pre * nchunks;
  visit_numeric(dst.dtype(), dst.device(), "index_add_", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    T* dp = static_cast<T*>(dst.data_ptr());
    const T* sp = static_cast<const T*>(src.data_ptr());
#pragma omp parallel for schedule(static) if (s.pre * n * s.post > 2 * kParallelGrain && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t p = t / nchunks, c0 = (t % nchunks) * chunk, c1 = std::min(s.post, c0 + chunk);
      for (int64_t j = 0; j < n; ++j) {
        T* d = dp + (p * s.mid + ip[j]) * s.post;
        const T* a = sp + (p * n + j) * s.post;
        for (int64_t i = c0; i < c1; ++i) d[i] = static_cast<T>(static_cast<A>(d[i]) + static_cast<A>(a[i]));
      }
    }
  });
}

void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  const Strides is = contiguous_strides(idx.sizes());
  auto rows = rows_without<3>(idx.sizes(), dim, {&out.strides(), &x.strides(), &is});
  const int64_t L = idx.size(dim), so = out.stride(dim), sx = x.stride(dim), si = is[dim];
  const int64_t* ip = idx.data<int64_t>();
  visit_all(x.dtype(), x.device(), "gather", [&](auto tag) {
    using T = decltype(tag);
    T* op = static_cast<T*>(out.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
#pragma omp parallel for schedule(static) if (rows.count * L > 2 * kParallelGrain && rows.count > 1)
    for (int64_t r = 0; r < rows.count; ++r) {
      const auto off = row_offsets<3>(rows, r);
      for (int64_t j = 0; j < L; ++j) op[off[0] + j * so] = xp[off[1] + ip[off[2] + j * si] * sx];
    }
  });
}

void scatter(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src, bool accumulate) {
  const Strides is = contiguous_strides(idx.sizes());
  // Rows differ in their non-`dim` coordinates, so they write disjoint lines of `out`; within a
  // row the writes run in index order (the last duplicate wins, additions are ordered).
  auto rows = rows_without<3>(idx.sizes(), dim, {&out.strides(), &src.strides(), &is});
  const int64_t L = idx.size(dim), so = out.stride(dim), ss = src.stride(dim), si = is[dim];
  const int64_t* ip = idx.data<int64_t>();
  auto run = [&](auto tag, auto combine) {
    using T = decltype(tag);
    T* op = static_cast<T*>(out.data_ptr());
    const T* sp = static_cast<const T*>(src.data_ptr());
#pragma omp parallel for schedule(static) if (rows.count * L > 2 * kParallelGrain && rows.count > 1)
    for (int64_t r = 0; r < rows.count; ++r) {
      const auto off = row_offsets<3>(rows, r);
      for (int64_t j = 0; j < L; ++j) {
        T& o = op[off[0] + ip[off[2] + j * si] * so];
        o = combine(o, sp[off[1] + j * ss]);
      }
    }
  };
  if (accumulate) {
    visit_numeric(out.dtype(), out.device(), "scatter_add", [&](auto tag) {
      using T = decltype(tag);
      run(tag, [](T a, T b) { return static_cast<T>(static_cast<acc_t<T>>(a) + static_cast<acc_t<T>>(b)); });
    });
  } else {
    visit_all(out.dtype(), out.device(), "scatter", [&](auto tag) {
      using T = decltype(tag);
      run(tag, [](T, T b) { return b; });
    });
  }
}

void triangle(const Tensor& x, int64_t k, bool lower, const Tensor& out) {
  const int64_t R = x.size(-2), C = x.size(-1);
  const int64_t rows = C == 0 ? 0 : x.numel() / C;
  const size_t es = x.element_size();
  const char* xp = static_cast<const char*>(x.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  // Zero is all-zero bytes in every dtype, so rows are copied and cleared as bytes.
#pragma omp parallel for schedule(static) if (rows * C > 2 * kParallelGrain)
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t r = t % R;
    const int64_t b = lower ? 0 : std::clamp<int64_t>(r + k, 0, C);
    const int64_t e = lower ? std::clamp<int64_t>(r + k + 1, 0, C) : C;
    const size_t base = static_cast<size_t>(t * C) * es;
    std::memset(op + base, 0, static_cast<size_t>(C) * es);
    if (e > b) std::memcpy(op + base + b * es, xp + base + b * es, static_cast<size_t>(e - b) * es);
  }
}

void one_hot(const Tensor& idx, int64_t classes, const Tensor& out) {
  const int64_t* ip = idx.data<int64_t>();
  int64_t* op = out.data<int64_t>();
  for (int64_t i = 0, end = idx.numel(); i < end; ++i) op[i * classes + ip[i]] = 1;
}

void multinomial(const Tensor& probs, int64_t num_samples, bool replacement, uint64_t seed, uint64_t base,
                 const Tensor& out) {
  const int64_t rows = probs.size(0), n = probs.size(1);
  const double* pp = probs.data<double>();
  int64_t* op = out.data<int64_t>();
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n * (replacement ? 1 : num_samples) > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const double* w = pp + r * n;
    int64_t* o = op + r * num_samples;
    auto unit = [&](int64_t s) {
      uint32_t v[4];
      Philox::block(seed, base + static_cast<uint64_t>(r * num_samples + s), v);
      return Philox::to_unit_double(v[0], v[1]);
    };
    int64_t last_nonzero = 0;
    for (int64_t i = 0; i < n; ++i)
      if (w[i] > 0) last_nonzero = i;
    if (replacement) {
      // Inverse CDF: the first category whose running sum exceeds u * total.
      std::vector<double> cdf(static_cast<size_t>(n));
      double acc = 0;
      for (int64_t i = 0; i < n; ++i) cdf[i] = acc += w[i];
      for (int64_t s = 0; s < num_samples; ++s) {
        const double u = unit(s) * acc;
        const int64_t i = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
        o[s] = std::min(i, last_nonzero);  // u rounded up to the total picks the last live category
      }
    } else {
      // Sequential draws from the remaining weights; a drawn category's weight drops to zero.
      std::vector<double> left(w, w + n);
      for (int64_t s = 0; s < num_samples; ++s) {
        double total = 0;
        int64_t last = -1;
        for (int64_t i = 0; i < n; ++i) {
          total += left[i];
          if (left[i] > 0) last = i;
        }
        const double u = unit(s) * total;
        int64_t pick = last;
        double acc = 0;
        for (int64_t i = 0; i < n; ++i) {
          acc += left[i];
          if (left[i] > 0 && acc > u) {
            pick = i;
            break;
          }
        }
        o[s] = pick;
        left[pick] = 0;
      }
    }
  }
}

}  // namespace brisk::kernels::cpu
