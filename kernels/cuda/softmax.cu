// softmax, log_softmax and their backward on the GPU. Over the last dim, rows follow a
// SoftmaxPlan (device/reduce_plan.h): a warp per row for short rows, a block per row for long
// ones (rows of 50304 and more), 128-bit loads when the rows are 16-byte aligned, and one pass
// of the online softmax state (running max and sum of exp(x - max)) before the write pass. Over
// another dim, one thread per (outer, inner) column walks the dim (consecutive threads read
// consecutive columns). f16/bf16 compute in f32.
#include <limits>

#include "brisk/kernels/device/reduce_plan.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/launch.cuh"
#include "cuda/row_cache.cuh"
#include "cuda/softmax.h"

namespace brisk::kernels::cuda {

namespace {

namespace kd = kernels::device;
using brisk::cuda::detail::launch;

constexpr int kColumnThreads = 256;
template <class A>
using OnlineExp = kd::OnlineSoftmaxOp<A>;

// The row's combined value in every thread of the row: warp_reduce leaves it in every lane;
// after block_reduce, thread 0 broadcasts it through shared memory.
template <class Op, class S>
__device__ inline S reduce_row(int lanes, S v, S* scratch, S* total) {
  if (lanes == kd::kWarp) return kd::warp_reduce<Op>(v);
  v = kd::block_reduce<Op>(v, scratch);
  if (threadIdx.x == 0) *total = v;
  __syncthreads();
  return *total;
}

template <class T, int W>
__device__ inline kd::AlignedVector<T, W> load_piece(const T* p) {
  return *reinterpret_cast<const kd::AlignedVector<T, W>*>(p);
}

// x, y: (rows, n) contiguous; y written (=). Block (lanes, rows_per_block).
template <class T, int W, bool Log>
__global__ void __launch_bounds__(1024)
    softmax_rows_kernel(const kd::SoftmaxPlan p, const T* __restrict__ x, T* __restrict__ y) {
  using A = acc_t<T>;
  using Op = kd::OnlineSoftmaxOp<A>;
  __shared__ kd::SoftmaxState<A> scratch[kd::kWarp];
  __shared__ kd::SoftmaxState<A> total;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * p.rows_per_block + threadIdx.y;
  const bool valid = row < p.rows;
  const T* xr = x + (valid ? row : 0) * p.n;
  T* yr = y + (valid ? row : 0) * p.n;
  kd::SoftmaxState<A> st = Op::identity();
  if (valid) {
    kd::for_each_row_piece<W>(p, threadIdx.x, [&](int64_t i) {
      const kd::AlignedVector<T, W> v = load_piece<T, W>(xr + i);
#pragma unroll
      for (int k = 0; k < W; ++k) st = Op::push(st, kd::to_acc(v.v[k]));
    });
  }
  st = reduce_row<Op>(p.lanes, st, scratch, &total);
  if (!valid) return;
  const kd::SoftmaxNorm<A> norm = kd::softmax_norm(st, Log);
  kd::for_each_row_piece<W>(p, threadIdx.x, [&](int64_t i) {
    const kd::AlignedVector<T, W> v = load_piece<T, W>(xr + i);
    kd::AlignedVector<T, W> out;
#pragma unroll
    for (int k = 0; k < W; ++k) out.v[k] = kd::from_acc<T>(kd::softmax_value(kd::to_acc(v.v[k]), norm, Log));
    *reinterpret_cast<kd::AlignedVector<T, W>*>(yr + i) = out;
  });
}

// x, y: (rows, n) contiguous and 16-byte aligned, n a multiple of W; y written (=). The row is
// held on chip (row_cache.cuh): read once, its max and then its sum of exp(x - max) reduced
// from the held copy, written once. Block (lanes, rows_per_block), or (kSharedLanes, 1) when
// Shared.
template <class T, int W, bool Log, bool Shared>
__global__ void __launch_bounds__(Shared ? row_cache::kSharedLanes : row_cache::kMaxRegisterThreads)
    softmax_rows_held_kernel(const kd::SoftmaxPlan p, const T* __restrict__ x, T* __restrict__ y) {
  using A = acc_t<T>;
  using Vec = kd::AlignedVector<T, W>;
  __shared__ A scratch[kd::kWarp];
  __shared__ A total;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < p.rows;
  row_cache::RowCache<T, W, Shared> c;
  c.pieces = valid ? p.n / W : 0;
  c.lane = static_cast<int>(threadIdx.x);
  c.lanes = static_cast<int>(blockDim.x);
  if constexpr (Shared) c.smem = reinterpret_cast<Vec*>(row_cache::dynamic_smem());
  if (valid) c.load(x + row * p.n);
  A m = kd::MaxOp<A>::identity();
  c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
    for (int k = 0; k < W; ++k) m = kd::MaxOp<A>::combine(m, kd::to_acc(v.v[k]));
  });
  m = reduce_row<kd::MaxOp<A>>(static_cast<int>(blockDim.x), m, scratch, &total);
  A s = A(0);
  c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
    for (int k = 0; k < W; ++k) s += OnlineExp<A>::exp_(kd::to_acc(v.v[k]) - m);
  });
  s = reduce_row<kd::SumOp<A>>(static_cast<int>(blockDim.x), s, scratch, &total);
  if (!valid) return;
  // A row of -inf has sum exp(NaN) = NaN here (the CPU's 0 normalises to NaN as well).
  const kd::SoftmaxNorm<A> norm = kd::softmax_norm(kd::SoftmaxState<A>{m, s}, Log);
  T* yr = y + row * p.n;
  c.for_each([&](int64_t i, const Vec& v) {
    Vec out;
#pragma unroll
    for (int k = 0; k < W; ++k) out.v[k] = kd::from_acc<T>(kd::softmax_value(kd::to_acc(v.v[k]), norm, Log));
    *reinterpret_cast<Vec*>(yr + i) = out;
  });
}

// The same for rows too long for one block: a cluster of blocks per row (grid.x = rows *
// cluster), block r holding pieces [r * chunk, (r + 1) * chunk) in registers. Each block reduces
// its chunk's max and sum of exp(x - that max); the blocks' (max, sum) states are merged over
// the cluster in rank order (row_cache::cluster_combine), one exchange per row; `split`: its
// second barrier overlaps the writes (row_cache::split_barrier_enabled).
template <class T, int W, bool Log>
__global__ void __launch_bounds__(row_cache::kClusterLanes, row_cache::kClusterBlocksPerSm)
    softmax_rows_cluster_kernel(const kd::SoftmaxPlan p, int64_t chunk, bool split, const T* __restrict__ x,
                                T* __restrict__ y) {
  using A = acc_t<T>;
  using Vec = kd::AlignedVector<T, W>;
  __shared__ A scratch[kd::kWarp];
  __shared__ A total;
  __shared__ kd::SoftmaxState<A> slot;
  const unsigned rank = row_cache::cluster_rank(), blocks = row_cache::cluster_size();
  const int64_t row = static_cast<int64_t>(blockIdx.x) / blocks;
  const int64_t first = static_cast<int64_t>(rank) * chunk, pieces = p.n / W;
  row_cache::RowCache<T, W, false> c;
  c.pieces = std::max<int64_t>(0, std::min(chunk, pieces - first));
  c.lane = static_cast<int>(threadIdx.x);
  c.lanes = static_cast<int>(blockDim.x);
  c.load(x + row * p.n + first * W);
  A m = kd::MaxOp<A>::identity();
  c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
    for (int k = 0; k < W; ++k) m = kd::MaxOp<A>::combine(m, kd::to_acc(v.v[k]));
  });
  m = reduce_row<kd::MaxOp<A>>(static_cast<int>(blockDim.x), m, scratch, &total);
  A s = A(0);
  // A chunk of only -inf (or none) adds nothing: its state stays (-inf, 0), which merging skips.
  if (m != -std::numeric_limits<A>::infinity()) {
    c.for_each([&](int64_t, const Vec& v) {
#pragma unroll
      for (int k = 0; k < W; ++k) s += OnlineExp<A>::exp_(kd::to_acc(v.v[k]) - m);
    });
  }
  s = reduce_row<kd::SumOp<A>>(static_cast<int>(blockDim.x), s, scratch, &total);
  const kd::SoftmaxState<A> st =
      row_cache::cluster_combine<kd::OnlineSoftmaxOp<A>>(kd::SoftmaxState<A>{m, s}, &slot, split);
  const kd::SoftmaxNorm<A> norm = kd::softmax_norm(st, Log);
  T* yr = y + row * p.n + first * W;
  c.for_each([&](int64_t i, const Vec& v) {
    Vec out;
#pragma unroll
    for (int k = 0; k < W; ++k) out.v[k] = kd::from_acc<T>(kd::softmax_value(kd::to_acc(v.v[k]), norm, Log));
    *reinterpret_cast<Vec*>(yr + i) = out;
  });
  row_cache::cluster_release(split);
}

// x, y: (outer, n, inner) contiguous, inner > 1; y written (=). One thread per (outer, inner).
template <class T, bool Log>
__global__ void softmax_columns_kernel(int64_t outer, int64_t n, int64_t inner, const T* __restrict__ x,
                                       T* __restrict__ y) {
  using A = acc_t<T>;
  using Op = kd::OnlineSoftmaxOp<A>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner; c += step) {
    const int64_t o = c / inner, j = c - o * inner;
    const T* xc = x + o * n * inner + j;
    T* yc = y + o * n * inner + j;
    kd::SoftmaxState<A> st = Op::identity();
    for (int64_t i = 0; i < n; ++i) st = Op::push(st, kd::to_acc(xc[i * inner]));
    const kd::SoftmaxNorm<A> norm = kd::softmax_norm(st, Log);
    for (int64_t i = 0; i < n; ++i)
      yc[i * inner] = kd::from_acc<T>(kd::softmax_value(kd::to_acc(xc[i * inner]), norm, Log));
  }
}

// softmax: dx = y * (g - sum(g * y)); log_softmax: dx = g - exp(y) * sum(g).
template <class A, bool Log>
__device__ inline A backward_term(A g, A y) {
  return Log ? g : g * y;
}
template <class A, bool Log>
__device__ inline A backward_value(A g, A y, A s) {
  using std::exp;
  return Log ? g - exp(y) * s : y * (g - s);
}

// grad, y, dx: (rows, n) contiguous; dx written (=).
template <class T, int W, bool Log>
__global__ void __launch_bounds__(1024) softmax_backward_rows_kernel(const kd::SoftmaxPlan p, const T* __restrict__ g,
                                                                     const T* __restrict__ y, T* __restrict__ dx) {
  using A = acc_t<T>;
  __shared__ A scratch[kd::kWarp];
  __shared__ A total;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * p.rows_per_block + threadIdx.y;
  const bool valid = row < p.rows;
  const int64_t off = (valid ? row : 0) * p.n;
  A s = A(0);
  if (valid) {
    kd::for_each_row_piece<W>(p, threadIdx.x, [&](int64_t i) {
      const kd::AlignedVector<T, W> gv = load_piece<T, W>(g + off + i), yv = load_piece<T, W>(y + off + i);
#pragma unroll
      for (int k = 0; k < W; ++k) s += backward_term<A, Log>(kd::to_acc(gv.v[k]), kd::to_acc(yv.v[k]));
    });
  }
  s = reduce_row<kd::SumOp<A>>(p.lanes, s, scratch, &total);
  if (!valid) return;
  kd::for_each_row_piece<W>(p, threadIdx.x, [&](int64_t i) {
    const kd::AlignedVector<T, W> gv = load_piece<T, W>(g + off + i), yv = load_piece<T, W>(y + off + i);
    kd::AlignedVector<T, W> out;
#pragma unroll
    for (int k = 0; k < W; ++k)
      out.v[k] = kd::from_acc<T>(backward_value<A, Log>(kd::to_acc(gv.v[k]), kd::to_acc(yv.v[k]), s));
    *reinterpret_cast<kd::AlignedVector<T, W>*>(dx + off + i) = out;
  });
}

// grad, y, dx: (outer, n, inner) contiguous, inner > 1; dx written (=).
template <class T, bool Log>
__global__ void softmax_backward_columns_kernel(int64_t outer, int64_t n, int64_t inner, const T* __restrict__ g,
                                                const T* __restrict__ y, T* __restrict__ dx) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner; c += step) {
    const int64_t o = c / inner, j = c - o * inner, base = o * n * inner + j;
    A s = A(0);
    for (int64_t i = 0; i < n; ++i)
      s += backward_term<A, Log>(kd::to_acc(g[base + i * inner]), kd::to_acc(y[base + i * inner]));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = base + i * inner;
      dx[k] = kd::from_acc<T>(backward_value<A, Log>(kd::to_acc(g[k]), kd::to_acc(y[k]), s));
    }
  }
}

struct DimGeom {
  int64_t outer = 1, n = 1, inner = 1;
};
DimGeom dim_geom(const Shape& s, int64_t dim) {
  DimGeom g;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) (d < dim ? g.outer : d == dim ? g.n : g.inner) *= s[d];
  return g;
}

unsigned column_blocks(int64_t columns, int device) {
  const int64_t cap = int64_t{brisk::cuda::detail::multiprocessor_count(device)} * 16;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(kd::ceil_div(columns, kColumnThreads), cap)));
}

bool aligned16(const Tensor& t) {
  return kd::is_aligned(t.data_ptr(), kd::kVecBytes);
}

template <class T, bool Log>
void softmax_typed(const Tensor& x, const DimGeom& g, const Tensor& y) {
  const int dev = x.device().index;
  cudaStream_t stream = brisk::cuda::detail::current_native_stream(dev);
  const T* px = static_cast<const T*>(x.data_ptr());
  T* py = static_cast<T*>(y.data_ptr());
  const char* name = Log ? "log_softmax" : "softmax";
  if (g.inner == 1) {
    const kd::SoftmaxPlan p = kd::make_softmax_plan(g.outer, g.n, sizeof(T), aligned16(x) && aligned16(y));
    const dim3 block(p.lanes, p.rows_per_block);
    constexpr int W = kd::vec_width<T>;
    const row_cache::HoldPlan h =
        row_cache::plan_hold(p.vec == W ? p.n / W : 0, p.lanes, sizeof(kd::AlignedVector<T, W>), dev);
    if (h.hold == row_cache::Hold::Registers)
      launch(name, softmax_rows_held_kernel<T, W, Log, false>, dim3(p.grid_x), block, 0, stream, p, px, py);
    else if (h.hold == row_cache::Hold::Cluster)
      brisk::cuda::detail::launch_clusters(name, softmax_rows_cluster_kernel<T, W, Log>,
                                           dim3(static_cast<unsigned>(p.rows * h.cluster)),
                                           dim3(row_cache::kClusterLanes), h.cluster, stream, p, h.chunk_pieces,
                                           row_cache::split_barrier_enabled(), px, py);
    else if (h.hold == row_cache::Hold::Shared)
      launch(name, softmax_rows_held_kernel<T, W, Log, true>, dim3(static_cast<unsigned>(p.rows)),
             dim3(row_cache::kSharedLanes), h.smem_bytes, stream, p, px, py);
    else if (p.vec == W)
      launch(name, softmax_rows_kernel<T, W, Log>, dim3(p.grid_x), block, 0, stream, p, px, py);
    else
      launch(name, softmax_rows_kernel<T, 1, Log>, dim3(p.grid_x), block, 0, stream, p, px, py);
  } else {
    launch(name, softmax_columns_kernel<T, Log>, dim3(column_blocks(g.outer * g.inner, dev)), dim3(kColumnThreads), 0,
           stream, g.outer, g.n, g.inner, px, py);
  }
}

template <class T, bool Log>
void softmax_backward_typed(const Tensor& grad, const Tensor& y, const DimGeom& g, const Tensor& dx) {
  const int dev = y.device().index;
  cudaStream_t stream = brisk::cuda::detail::current_native_stream(dev);
  const T* pg = static_cast<const T*>(grad.data_ptr());
  const T* py = static_cast<const T*>(y.data_ptr());
  T* pd = static_cast<T*>(dx.data_ptr());
  const char* name = Log ? "log_softmax_backward" : "softmax_backward";
  if (g.inner == 1) {
    const kd::SoftmaxPlan p =
        kd::make_softmax_plan(g.outer, g.n, sizeof(T), aligned16(grad) && aligned16(y) && aligned16(dx));
    const dim3 block(p.lanes, p.rows_per_block);
    constexpr int W = kd::vec_width<T>;
    if (p.vec == W)
      launch(name, softmax_backward_rows_kernel<T, W, Log>, dim3(p.grid_x), block, 0, stream, p, pg, py, pd);
    else
      launch(name, softmax_backward_rows_kernel<T, 1, Log>, dim3(p.grid_x), block, 0, stream, p, pg, py, pd);
  } else {
    launch(name, softmax_backward_columns_kernel<T, Log>, dim3(column_blocks(g.outer * g.inner, dev)),
           dim3(kColumnThreads), 0, stream, g.outer, g.n, g.inner, pg, py, pd);
  }
}

}  // namespace

void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& y) {
  const char* op = log ? "log_softmax" : "softmax";
  OpScope scope(op, &x);
  if (x.numel() == 0) return;
  brisk::cuda::DeviceGuard guard(x.device().index);
  const DimGeom g = dim_geom(x.sizes(), dim);
  visit_float(x.dtype(), x.device(), op, [&](auto tag) {
    using T = decltype(tag);
    if (log)
      softmax_typed<T, true>(x, g, y);
    else
      softmax_typed<T, false>(x, g, y);
  });
}

void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& dx) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  OpScope scope(op, &grad, &y);
  if (y.numel() == 0) return;
  brisk::cuda::DeviceGuard guard(y.device().index);
  const DimGeom g = dim_geom(y.sizes(), dim);
  visit_float(y.dtype(), y.device(), op, [&](auto tag) {
    using T = decltype(tag);
    if (log)
      softmax_backward_typed<T, true>(grad, y, g, dx);
    else
      softmax_backward_typed<T, false>(grad, y, g, dx);
  });
}

}  // namespace brisk::kernels::cuda
