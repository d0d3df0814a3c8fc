// CUDA index kernels: index_select (row copies), index_add_ (runs of a stable index sort, or
// atomics), gather, scatter / scatter_add (one thread per line along `dim`, or atomics),
// masked_fill, tril/triu and one_hot. Bad index values go to the device-error slot.
#include <array>

#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/indexing.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/settings.h"
#include "cuda/index.h"
#include "cuda/index_common.cuh"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace rt = brisk::cuda::detail;
using common::in_range;
using common::report_bad_value;
using common::Slot;
using device::IndexDiv;

// (pre, mid, post) of a contiguous shape around `dim`.
struct Split3 {
  int64_t pre = 1, mid = 1, post = 1;
};
Split3 split_around(const Shape& s, int64_t dim) {
  Split3 r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) (d < dim ? r.pre : d == dim ? r.mid : r.post) *= s[d];
  return r;
}

Shape without(const Shape& s, int64_t dim) {
  Shape r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    if (d != dim) r.push_back(s[d]);
  return r;
}

// Calls f(U{}) with the unsigned type of x's element size: kernels that only move elements
// need no dtype dispatch.
template <class F>
void visit_bytes(size_t element_size, const char* op, F&& f) {
  switch (element_size) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    case 8:
      f(uint64_t{});
      break;
    default:
      BRISK_THROW(op, ": unsupported element size ", element_size);
  }
}

int32_t index_error(const char* op) {
  // One id per op, registered once (the messages are static strings).
  return rt::register_device_error(op);
}

// --- index_add_ ---------------------------------------------------------------------------

// dst: (pre, mid, post), `+=`; src: (pre, n, post); keys/pos: idx sorted stably (keys >= mid
// are bad values, sorted last). Item (p, k, c): the thread at the first key of each run adds the
// run's source rows into dst in position order, rounding to T after each add as the CPU does.
template <class T>
__global__ void index_add_runs_kernel(int64_t total, IndexDiv post_div, IndexDiv n_div, int64_t n, int64_t mid,
                                      int64_t post, const uint32_t* __restrict__ keys, const int32_t* __restrict__ pos,
                                      const T* __restrict__ src, T* __restrict__ dst) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t row, c, p, k;
    post_div.divmod(i, row, c);
    n_div.divmod(row, p, k);
    T* d = nullptr;  // read only once k is known to start a run of valid keys
    T acc{};
    const bool first = device::for_each_in_run(keys, pos, n, k, mid, [&](int64_t j) {
      if (!d) {
        d = dst + (p * mid + static_cast<int64_t>(keys[k])) * post + c;
        acc = *d;
      }
      acc = device::from_acc<T>(device::to_acc(acc) + device::to_acc(src[(p * n + j) * post + c]));
    });
    if (first) *d = acc;
  }
}

// dst: (pre, mid, post), `+=` with atomicAdd; src: (pre, n, post); idx: (n). Item (p, j, c).
template <class T, class I>
__global__ void index_add_atomic_kernel(int64_t total, IndexDiv post_div, IndexDiv n_div, int64_t mid, int64_t post,
                                        const I* __restrict__ idx, const T* __restrict__ src, T* __restrict__ dst,
                                        Slot* slot, int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t row, c, p, j;
    post_div.divmod(i, row, c);
    n_div.divmod(row, p, j);
    const I v = idx[j];
    if (!in_range(v, mid)) {
      report_bad_value(slot, code, static_cast<int64_t>(v), mid);
      continue;
    }
    common::atomic_add(dst + (p * mid + static_cast<int64_t>(v)) * post + c, src[i]);
  }
}

// --- gather / scatter --------------------------------------------------------------------------

// out: contiguous, idx's shape, `=`; ix over idx's shape: operand 0 = x without `dim` (stride 0
// there), operand 1 = idx.
template <class U, class I>
__global__ void gather_kernel(int64_t n, device::StridedIndexer<2> ix, const U* __restrict__ x, int64_t x_dim_stride,
                              int64_t x_dim_size, const I* __restrict__ idx, U* __restrict__ out, Slot* slot,
                              int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[2];
    ix.offsets(i, off);
    const I v = idx[off[1]];
    if (!in_range(v, x_dim_size)) {
      report_bad_value(slot, code, static_cast<int64_t>(v), x_dim_size);
      out[i] = U{};
      continue;
    }
    out[i] = x[off[0] + static_cast<int64_t>(v) * x_dim_stride];
  }
}

// One thread per line of idx along `dim` (ix over idx's shape without `dim`: operands out, src,
// idx), walking the line in order: the last duplicate wins, additions run in index order.
template <class T, bool Accumulate, class I>
__global__ void scatter_lines_kernel(int64_t lines, device::StridedIndexer<3> ix, int64_t L, T* __restrict__ out,
                                     int64_t out_dim_stride, int64_t out_dim_size, const T* __restrict__ src,
                                     int64_t src_dim_stride, const I* __restrict__ idx, int64_t idx_dim_stride,
                                     Slot* slot, int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; line < lines; line += step) {
    int64_t off[3];
    ix.offsets(line, off);
    for (int64_t j = 0; j < L; ++j) {
      const I v = idx[off[2] + j * idx_dim_stride];
      if (!in_range(v, out_dim_size)) {
        report_bad_value(slot, code, static_cast<int64_t>(v), out_dim_size);
        continue;
      }
      T& o = out[off[0] + static_cast<int64_t>(v) * out_dim_stride];
      const T s = src[off[1] + j * src_dim_stride];
      if constexpr (Accumulate) {
        o = device::from_acc<T>(device::to_acc(o) + device::to_acc(s));
      } else {
        o = s;
      }
    }
  }
}

// One thread per idx element (ix over idx's shape: operand 0 = out with stride 0 at `dim`, then
// src, idx), atomicAdd into out.
template <class T, class I>
__global__ void scatter_add_atomic_kernel(int64_t n, device::StridedIndexer<3> ix, T* __restrict__ out,
                                          int64_t out_dim_stride, int64_t out_dim_size, const T* __restrict__ src,
                                          const I* __restrict__ idx, Slot* slot, int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[3];
    ix.offsets(i, off);
    const I v = idx[off[2]];
    if (!in_range(v, out_dim_size)) {
      report_bad_value(slot, code, static_cast<int64_t>(v), out_dim_size);
      continue;
    }
    common::atomic_add(out + off[0] + static_cast<int64_t>(v) * out_dim_stride, src[off[1]]);
  }
}

// --- masked_fill, triangles, one_hot -------------------------------------------------------------

template <class T, class M>
struct MaskedFillOp {
  acc_t<T> value;
  __device__ acc_t<T> operator()(acc_t<T> x, acc_t<M> m) const { return m ? value : x; }
};

// x, out: contiguous (..., R, C) of U; element i sits at row (i / C) % R, column i % C.
template <class U>
__global__ void triangle_kernel(int64_t n, IndexDiv c_div, IndexDiv r_div, int64_t k, bool lower,
                                const U* __restrict__ x, U* __restrict__ out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t q, c, m, r;
    c_div.divmod(i, q, c);
    r_div.divmod(q, m, r);
    const int64_t d = c - r;
    out[i] = (lower ? d <= k : d >= k) ? x[i] : U{};
  }
}

// idx: (n); out: (n, classes) zeros, `= 1` at each index.
template <class I>
__global__ void one_hot_kernel(int64_t n, const I* __restrict__ idx, int64_t classes, int64_t* __restrict__ out,
                               Slot* slot, int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const I v = idx[i];
    if (!in_range(v, classes)) {
      report_bad_value(slot, code, static_cast<int64_t>(v), classes);
      continue;
    }
    out[i * classes + static_cast<int64_t>(v)] = 1;
  }
}

// One block: out[0] = max(idx[0..n)).
constexpr int kMaxThreads = 1024;

template <class I>
__global__ void __launch_bounds__(kMaxThreads)
    index_max_kernel(int64_t n, const I* __restrict__ idx, int64_t* __restrict__ out) {
  __shared__ int64_t scratch[device::kWarp];
  int64_t m = device::MaxOp<int64_t>::identity();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = device::MaxOp<int64_t>::combine(m, idx[i]);
  m = device::block_reduce<device::MaxOp<int64_t>>(m, scratch);
  if (threadIdx.x == 0) *out = m;
}

}  // namespace

void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  OpScope scope("index_select", &x, &idx);
  const int32_t code = [] {
    static const int32_t id = index_error("index_select: index out of range [0, limit)");
    return id;
  }();
  const Split3 s = split_around(x.sizes(), dim);
  common::index_rows(x, idx, s.pre, s.mid, s.post, out, code);
}

void index_add(const Tensor& dst, int64_t dim, const Tensor& idx, const Tensor& src) {
  OpScope scope("index_add_", &dst, &idx, &src);
  const int32_t code = [] {
    static const int32_t id = index_error("index_add_: index out of range [0, limit)");
    return id;
  }();
  const Split3 s = split_around(dst.sizes(), dim);
  const int64_t n = idx.numel(), total = s.pre * n * s.post;
  if (total == 0) return;
  const int device = dst.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  visit_numeric(dst.dtype(), dst.device(), "index_add_", [&](auto tag) {
    using T = decltype(tag);
    const T* sp = static_cast<const T*>(src.data_ptr());
    T* dp = static_cast<T*>(dst.data_ptr());
    if constexpr (common::kHasAtomicAdd<T>) {
      if (!deterministic()) {
        visit_index(idx.dtype(), idx.device(), "index_add_", [&](auto itag) {
          using I = decltype(itag);
          rt::launch("index_add_atomic", index_add_atomic_kernel<T, I>, dim3(common::grid_for(total, device)),
                     dim3(common::kThreads), 0, stream, total, IndexDiv(s.post, total), IndexDiv(n, total / s.post),
                     s.mid, s.post, static_cast<const I*>(idx.data_ptr()), sp, dp, rt::device_error_slot(), code);
        });
        return;
      }
    }
    const common::SortedIndex sorted = common::sort_index(idx, s.mid, code);
    rt::launch("index_add_runs", index_add_runs_kernel<T>, dim3(common::grid_for(total, device)),
               dim3(common::kThreads), 0, stream, total, IndexDiv(s.post, total), IndexDiv(n, total / s.post), n, s.mid,
               s.post, static_cast<const uint32_t*>(sorted.keys.data_ptr()),
               static_cast<const int32_t*>(sorted.positions.data_ptr()), sp, dp);
  });
}

void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  OpScope scope("gather", &x, &idx);
  const int32_t code = [] {
    static const int32_t id = index_error("gather: index out of range [0, limit)");
    return id;
  }();
  const int64_t n = idx.numel();
  if (n == 0) return;
  const int device = x.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  Strides xs = x.strides();
  xs[dim] = 0;
  const auto ix = device::make_indexer<2>(idx.sizes(), {xs, idx.strides()});
  visit_bytes(x.element_size(), "gather", [&](auto utag) {
    using U = decltype(utag);
    visit_index(idx.dtype(), idx.device(), "gather", [&](auto itag) {
      using I = decltype(itag);
      rt::launch("gather", gather_kernel<U, I>, dim3(common::grid_for(n, device)), dim3(common::kThreads), 0, stream, n,
                 ix, static_cast<const U*>(x.data_ptr()), x.stride(dim), x.size(dim),
                 static_cast<const I*>(idx.data_ptr()), static_cast<U*>(out.data_ptr()), rt::device_error_slot(), code);
    });
  });
}

void scatter(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src, bool accumulate) {
  const char* op = accumulate ? "scatter_add" : "scatter";
  OpScope scope(op, &out, &idx, &src);
  static const int32_t code_set = index_error("scatter: index out of range [0, limit)");
  static const int32_t code_add = index_error("scatter_add: index out of range [0, limit)");
  const int32_t code = accumulate ? code_add : code_set;
  const int64_t n = idx.numel();
  if (n == 0) return;
  const int device = out.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  Slot* slot = rt::device_error_slot();

  // Lines along `dim`, in order: the only way to keep "last duplicate wins" and ordered additions.
  auto run_lines = [&](auto ttag, auto acc) {
    using T = decltype(ttag);
    constexpr bool kAccumulate = decltype(acc)::value;
    const Shape lines_shape = without(idx.sizes(), dim);
    const int64_t lines = shape_numel(lines_shape);
    const auto ix = device::make_indexer<3>(
        lines_shape, {without(out.strides(), dim), without(src.strides(), dim), without(idx.strides(), dim)});
    visit_index(idx.dtype(), idx.device(), op, [&](auto itag) {
      using I = decltype(itag);
      launch(op, scatter_lines_kernel<T, kAccumulate, I>, dim3(common::grid_for(lines, device)), dim3(common::kThreads),
             0, stream, lines, ix, idx.size(dim), static_cast<T*>(out.data_ptr()), out.stride(dim), out.size(dim),
             static_cast<const T*>(src.data_ptr()), src.stride(dim), static_cast<const I*>(idx.data_ptr()),
             idx.stride(dim), slot, code);
    });
  };

  if (!accumulate) {
    visit_bytes(out.element_size(), op, [&](auto utag) { run_lines(utag, std::false_type{}); });
    return;
  }
  visit_numeric(out.dtype(), out.device(), op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (common::kHasAtomicAdd<T>) {
      if (!deterministic()) {
        Strides os = out.strides();
        os[dim] = 0;
        const auto ix = device::make_indexer<3>(idx.sizes(), {os, src.strides(), idx.strides()});
        visit_index(idx.dtype(), idx.device(), op, [&](auto itag) {
          using I = decltype(itag);
          rt::launch("scatter_add_atomic", scatter_add_atomic_kernel<T, I>, dim3(common::grid_for(n, device)),
                     dim3(common::kThreads), 0, stream, n, ix, static_cast<T*>(out.data_ptr()), out.stride(dim),
                     out.size(dim), static_cast<const T*>(src.data_ptr()), static_cast<const I*>(idx.data_ptr()), slot,
                     code);
        });
        return;
      }
    }
    run_lines(tag, std::true_type{});
  });
}

void masked_fill(const Tensor& x, const Tensor& mask, double value, const Tensor& out) {
  OpScope scope("masked_fill", &x, &mask);
  visit_all(x.dtype(), x.device(), "masked_fill", [&](auto tag) {
    using T = decltype(tag);
    // Converted once on the host, as the CPU's fill converts.
    const acc_t<T> v = device::to_acc(device::from_acc<T>(static_cast<acc_t<T>>(value)));
    if (mask.dtype() == DType::Bool) {
      rt::launch_elementwise<T, T, bool>("masked_fill", out, {&x, &mask}, MaskedFillOp<T, bool>{v});
    } else {
      rt::launch_elementwise<T, T, uint8_t>("masked_fill", out, {&x, &mask}, MaskedFillOp<T, uint8_t>{v});
    }
  });
}

void triangle(const Tensor& x, int64_t k, bool lower, const Tensor& out) {
  OpScope scope(lower ? "tril" : "triu", &x);
  const int64_t n = x.numel();
  if (n == 0) return;
  const int device = x.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  const int64_t R = x.size(-2), C = x.size(-1);
  visit_bytes(x.element_size(), "triangle", [&](auto utag) {
    using U = decltype(utag);
    rt::launch(lower ? "tril" : "triu", triangle_kernel<U>, dim3(common::grid_for(n, device)), dim3(common::kThreads),
               0, stream, n, IndexDiv(C, n), IndexDiv(R, n / C), k, lower, static_cast<const U*>(x.data_ptr()),
               static_cast<U*>(out.data_ptr()));
  });
}

int64_t index_max(const Tensor& idx) {
  OpScope scope("one_hot", &idx);
  const int device = idx.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  Tensor m = empty({}, DType::I64, idx.device());
  visit_index(idx.dtype(), idx.device(), "one_hot", [&](auto itag) {
    using I = decltype(itag);
    rt::launch("index_max", index_max_kernel<I>, dim3(1), dim3(kMaxThreads), 0, stream, idx.numel(),
               static_cast<const I*>(idx.data_ptr()), static_cast<int64_t*>(m.data_ptr()));
  });
  int64_t value = 0;
  // The one host synchronisation of the family: the output's shape depends on the value.
  rt::memcpy_async(&value, m.data_ptr(), sizeof(value), stream, /*sync=*/true);
  // Recording mode runs no kernel, so there is no maximum to read back: say 0 (one class).
  return rt::recording() ? 0 : value;
}

void one_hot(const Tensor& idx, int64_t classes, const Tensor& out) {
  OpScope scope("one_hot", &idx);
  const int32_t code = [] {
    static const int32_t id = index_error("one_hot: class index out of range [0, limit)");
    return id;
  }();
  const int device = idx.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  rt::memset_async(out.data_ptr(), 0, out.nbytes(), stream);
  const int64_t n = idx.numel();
  if (n == 0) return;
  visit_index(idx.dtype(), idx.device(), "one_hot", [&](auto itag) {
    using I = decltype(itag);
    rt::launch("one_hot", one_hot_kernel<I>, dim3(common::grid_for(n, device)), dim3(common::kThreads), 0, stream, n,
               static_cast<const I*>(idx.data_ptr()), classes, static_cast<int64_t*>(out.data_ptr()),
               rt::device_error_slot(), code);
  });
}

}  // namespace brisk::kernels::cuda
