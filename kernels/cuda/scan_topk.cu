// cumsum, topk and take_along_dim_backward on the GPU (the along-one-dim kernels that are not
// softmax). Tensors are seen as (outer, n, inner), contiguous.
//  - cumsum: over the last dim, a warp (short rows) or a block (long rows) scans a row in tiles
//    of one element per thread (shuffle scans within warps, warp totals through shared memory),
//    carrying the running total from tile to tile; over another dim, one thread per column adds
//    down the dim in order, exactly as the CPU does. Sums in sum_acc_t, as on the CPU.
//  - topk: a bitonic sort of (key, index) items per row (device/topk.h), in shared-memory tiles
//    and, for rows longer than a tile, global steps; the first k items are the answer.
//  - take_along_dim_backward: one thread per column adds its grads in index order (no atomics,
//    so repeated indices sum in the CPU's order).
#include "brisk/kernels/device/reduce_plan.h"
#include "brisk/kernels/device/topk.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/launch.cuh"
#include "cuda/softmax.h"

namespace brisk::kernels::cuda {

namespace {

namespace kd = kernels::device;
using brisk::cuda::detail::launch;

constexpr int kScanColumnThreads = 256;

struct ScanDimGeom {
  int64_t outer = 1, n = 1, inner = 1;
};
ScanDimGeom scan_dim_geom(const Shape& s, int64_t dim) {
  ScanDimGeom g;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) (d < dim ? g.outer : d == dim ? g.n : g.inner) *= s[d];
  return g;
}

unsigned grid_for(int64_t items, int threads, int device) {
  const int64_t cap = int64_t{brisk::cuda::detail::multiprocessor_count(device)} * 16;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(kd::ceil_div(items, threads), cap)));
}

// --- cumsum -----------------------------------------------------------------------------------------

template <class S>
__device__ inline S warp_inclusive_scan(S v) {
  const int lane = threadIdx.x % kd::kWarp;
#pragma unroll
  for (int d = 1; d < kd::kWarp; d <<= 1) {
    const S t = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += t;
  }
  return v;
}

// Inclusive scan of one value per thread over a tile of blockDim.x threads (a warp per row when
// blockDim.x == 32, else one row per block); `total` receives the tile's sum. Every thread of the
// block calls it. scratch: 32 values in shared memory.
template <class S>
__device__ inline S tile_inclusive_scan(S v, S* scratch, S& total) {
  v = warp_inclusive_scan(v);
  if (blockDim.x == kd::kWarp) {
    total = __shfl_sync(0xffffffffu, v, kd::kWarp - 1);
    return v;
  }
  const int lane = threadIdx.x % kd::kWarp, warp = threadIdx.x / kd::kWarp, warps = blockDim.x / kd::kWarp;
  if (lane == kd::kWarp - 1) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    S w = lane < warps ? scratch[lane] : S(0);
    w = warp_inclusive_scan(w);
    scratch[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v += scratch[warp - 1];
  total = scratch[warps - 1];
  __syncthreads();  // scratch is rewritten by the next tile
  return v;
}

// x: (rows, n) contiguous; y: (rows, n) written (=). Block (lanes, rows per block).
template <class T, class S, class O>
__global__ void __launch_bounds__(512)
    cumsum_rows_kernel(int64_t rows, int64_t n, bool reverse, const T* __restrict__ x, O* __restrict__ y) {
  __shared__ S scratch[kd::kWarp];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < rows;
  const T* xr = x + (valid ? row : 0) * n;
  O* yr = y + (valid ? row : 0) * n;
  S carry = S(0);
  for (int64_t t0 = 0; t0 < n; t0 += blockDim.x) {  // the same trip count in every thread
    const int64_t k = t0 + threadIdx.x;
    const int64_t i = reverse ? n - 1 - k : k;
    const bool here = valid && k < n;
    S v = here ? static_cast<S>(kd::to_acc(xr[i])) : S(0);
    S total;
    v = tile_inclusive_scan(v, scratch, total);
    if (here) yr[i] = kd::from_acc<O>(carry + v);
    carry += total;
  }
}

// x, y: (outer, n, inner) contiguous, inner > 1; y written (=). One thread per column.
template <class T, class S, class O>
__global__ void cumsum_columns_kernel(int64_t outer, int64_t n, int64_t inner, bool reverse, const T* __restrict__ x,
                                      O* __restrict__ y) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner; c += step) {
    const int64_t o = c / inner, j = c - o * inner, base = o * n * inner + j;
    S acc = S(0);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t e = base + (reverse ? n - 1 - k : k) * inner;
      acc += static_cast<S>(kd::to_acc(x[e]));
      y[e] = kd::from_acc<O>(acc);
    }
  }
}

// --- topk -------------------------------------------------------------------------------------------

// Shared memory of one sort tile.
constexpr int kTopkTileBytes = 32 * 1024;
template <class Item>
constexpr int64_t kTopkTileItems = kTopkTileBytes / sizeof(Item);

// items: (rows, row_len) with row_len = pow2_ceil(n); item i of a row is element i along the dim
// of x (outer, n, inner), or padding past n.
template <class T, class Item>
__global__ void topk_items_kernel(int64_t rows, int64_t n, int64_t inner, int64_t row_len, bool largest,
                                  const T* __restrict__ x, Item* __restrict__ items) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * row_len; e += step) {
    const int64_t row = e / row_len, i = e - row * row_len;
    if (i < n) {
      const int64_t o = row / inner, j = row - o * inner;
      items[e] = kd::topk_item(x[(o * n + i) * inner + j], static_cast<uint32_t>(i), largest);
    } else {
      items[e] = kd::pad_item<decltype(Item::key)>();
    }
  }
}

// Every step of sizes size_first .. size_last with strides min(size, tile) / 2 .. 1 on one tile of
// `tile` items (block b: items [b * tile, (b + 1) * tile) of `total`) in shared memory.
template <class Item>
__global__ void __launch_bounds__(1024) bitonic_tile_kernel(Item* __restrict__ items, int64_t total, int64_t tile,
                                                            int64_t row_len, int64_t size_first, int64_t size_last) {
  __shared__ Item s[kTopkTileItems<Item>];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * tile;
  const int64_t count = total - base < tile ? total - base : tile;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s[i] = items[base + i];
  __syncthreads();
  for (int64_t size = size_first; size <= size_last; size *= 2) {
    for (int64_t stride = (size < tile ? size : tile) / 2; stride > 0; stride /= 2) {
      for (int64_t t = threadIdx.x; t < tile / 2; t += blockDim.x) {
        const int64_t lo = kd::bitonic_lo(t, stride);
        // Rows are whole and aligned in a tile, so a pair is either in range or wholly past it.
        if (lo + stride < count)
          kd::compare_exchange(s[lo], s[lo + stride], kd::bitonic_ascending(base + lo, size, row_len));
      }
      __syncthreads();
    }
  }
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) items[base + i] = s[i];
}

// One step (size, stride) over all rows in global memory, one thread per pair.
template <class Item>
__global__ void bitonic_step_kernel(Item* __restrict__ items, int64_t total, int64_t row_len, int64_t size,
                                    int64_t stride) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total / 2; t += step) {
    const int64_t lo = kd::bitonic_lo(t, stride);
    kd::compare_exchange(items[lo], items[lo + stride], kd::bitonic_ascending(lo, size, row_len));
  }
}

// Sorts every row of (rows, row_len) items ascending; row_len a power of two.
template <class Item>
void sort_rows(Item* items, int64_t rows, int64_t row_len, cudaStream_t stream, int device) {
  const int64_t total = rows * row_len;
  const int64_t tile = std::min<int64_t>(kTopkTileItems<Item>, kd::pow2_ceil(total));
  const unsigned tile_threads = static_cast<unsigned>(std::clamp<int64_t>(tile / 2, 32, 1024));
  for (const kd::BitonicLaunch& l : kd::bitonic_schedule(row_len, tile)) {
    if (l.tile)
      launch("topk_sort_tiles", bitonic_tile_kernel<Item>, dim3(static_cast<unsigned>(kd::ceil_div(total, tile))),
             dim3(tile_threads), 0, stream, items, total, tile, row_len, l.size_first, l.size_last);
    else
      launch("topk_sort_step", bitonic_step_kernel<Item>, dim3(grid_for(total / 2, 256, device)), dim3(256), 0, stream,
             items, total, row_len, l.size_first, l.stride);
  }
}

// out: (rows, k_len) items ordered by index: the first k items of each sorted row, then padding.
template <class Item>
__global__ void topk_by_index_kernel(int64_t rows, int64_t row_len, int64_t k, int64_t k_len,
                                     const Item* __restrict__ sorted, Item* __restrict__ out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * k_len; e += step) {
    const int64_t row = e / k_len, i = e - row * k_len;
    using Key = decltype(Item::key);
    out[e] = i < k ? kd::index_item<Key>(sorted[row * row_len + i].index) : kd::pad_item<Key>();
  }
}

// values, indices: (outer, k, inner); entry i of a row is the element at the index of item i.
template <class T, class Item>
__global__ void topk_write_kernel(int64_t rows, int64_t n, int64_t inner, int64_t k, int64_t row_len,
                                  const Item* __restrict__ items, const T* __restrict__ x, T* __restrict__ values,
                                  int64_t* __restrict__ indices) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * k; e += step) {
    const int64_t row = e / k, i = e - row * k;
    const int64_t o = row / inner, j = row - o * inner;
    const int64_t idx = items[row * row_len + i].index;
    const int64_t dst = (o * k + i) * inner + j;
    values[dst] = x[(o * n + idx) * inner + j];
    indices[dst] = idx;
  }
}

// --- take_along_dim_backward ------------------------------------------------------------------------

// grad, idx: (outer, n_grad, inner); out: (outer, n_in, inner), zeroed, += in index order per column.
template <class T>
__global__ void take_along_dim_backward_kernel(int64_t outer, int64_t n_grad, int64_t n_in, int64_t inner,
                                               const T* __restrict__ grad, const int64_t* __restrict__ idx,
                                               T* __restrict__ out, brisk::cuda::detail::DeviceErrorSlot* slot,
                                               int32_t error_code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner; c += step) {
    const int64_t o = c / inner, j = c - o * inner;
    for (int64_t i = 0; i < n_grad; ++i) {
      const int64_t src = (o * n_grad + i) * inner + j, k = idx[src];
      if (k < 0 || k >= n_in) {
        if (atomicCAS(reinterpret_cast<int*>(&slot->code), 0, error_code) == 0) {
          slot->value = k;
          slot->limit = n_in;
        }
        continue;
      }
      T& dst = out[(o * n_in + k) * inner + j];
      dst = kd::from_acc<T>(kd::to_acc(dst) + kd::to_acc(grad[src]));
    }
  }
}

}  // namespace

void cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& y) {
  OpScope scope("cumsum", &x);
  if (x.numel() == 0) return;
  const int dev = x.device().index;
  brisk::cuda::DeviceGuard guard(dev);
  cudaStream_t stream = brisk::cuda::detail::current_native_stream(dev);
  const ScanDimGeom g = scan_dim_geom(x.sizes(), dim);
  visit_all(x.dtype(), x.device(), "cumsum", [&](auto tag) {
    using T = decltype(tag);
    using S = kd::sum_acc_t<T>;
    using O = std::conditional_t<std::is_floating_point_v<acc_t<T>>, T, int64_t>;
    const T* px = static_cast<const T*>(x.data_ptr());
    O* py = static_cast<O*>(y.data_ptr());
    if (g.inner == 1) {
      // A warp per row (8 rows a block) up to 256 elements, else a block of up to 512 threads.
      const int lanes = g.n <= 8 * kd::kWarp ? kd::kWarp : static_cast<int>(std::min<int64_t>(512, kd::pow2_ceil(g.n)));
      const int rows_per_block = lanes == kd::kWarp ? static_cast<int>(std::min<int64_t>(8, g.outer)) : 1;
      const int64_t blocks = kd::ceil_div(g.outer, rows_per_block);
      BRISK_CHECK(blocks <= 0x7fffffff, "cumsum: ", g.outer, " rows need more blocks than a grid holds");
      launch("cumsum", cumsum_rows_kernel<T, S, O>, dim3(static_cast<unsigned>(blocks)), dim3(lanes, rows_per_block), 0,
             stream, g.outer, g.n, reverse, px, py);
    } else {
      launch("cumsum", cumsum_columns_kernel<T, S, O>, dim3(grid_for(g.outer * g.inner, kScanColumnThreads, dev)),
             dim3(kScanColumnThreads), 0, stream, g.outer, g.n, g.inner, reverse, px, py);
    }
  });
}

void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted, const Tensor& values,
          const Tensor& indices) {
  OpScope scope("topk", &x);
  if (values.numel() == 0) return;  // k == 0 or no rows
  const int dev = x.device().index;
  brisk::cuda::DeviceGuard guard(dev);
  cudaStream_t stream = brisk::cuda::detail::current_native_stream(dev);
  const ScanDimGeom g = x.dim() == 0 ? ScanDimGeom{} : scan_dim_geom(x.sizes(), dim);
  BRISK_CHECK(g.n < (int64_t{1} << 31), "topk: dim ", dim, " of size ", g.n,
              " is too long for the cuda topk (at most 2^31 - 1)");
  visit_numeric(x.dtype(), x.device(), "topk", [&](auto tag) {
    using T = decltype(tag);
    using Key = kd::topk_key_t<T>;
    using Item = kd::TopkItem<Key>;
    const int64_t rows = g.outer * g.inner, row_len = kd::pow2_ceil(g.n);
    const T* px = static_cast<const T*>(x.data_ptr());
    Tensor buf = empty({rows * row_len * static_cast<int64_t>(sizeof(Item))}, DType::U8, x.device());
    Item* items = static_cast<Item*>(buf.data_ptr());
    launch("topk_items", topk_items_kernel<T, Item>, dim3(grid_for(rows * row_len, 256, dev)), dim3(256), 0, stream,
           rows, g.n, g.inner, row_len, largest, px, items);
    sort_rows(items, rows, row_len, stream, dev);
    const Item* chosen = items;
    int64_t chosen_len = row_len;
    Tensor by_index;
    if (!sorted && k > 1) {
      // The k chosen items again, ordered by index.
      const int64_t k_len = kd::pow2_ceil(k);
      by_index = empty({rows * k_len * static_cast<int64_t>(sizeof(Item))}, DType::U8, x.device());
      Item* bi = static_cast<Item*>(by_index.data_ptr());
      launch("topk_by_index", topk_by_index_kernel<Item>, dim3(grid_for(rows * k_len, 256, dev)), dim3(256), 0, stream,
             rows, row_len, k, k_len, static_cast<const Item*>(items), bi);
      sort_rows(bi, rows, k_len, stream, dev);
      chosen = bi;
      chosen_len = k_len;
    }
    launch("topk_write", topk_write_kernel<T, Item>, dim3(grid_for(rows * k, 256, dev)), dim3(256), 0, stream, rows,
           g.n, g.inner, k, chosen_len, chosen, px, static_cast<T*>(values.data_ptr()),
           static_cast<int64_t*>(indices.data_ptr()));
  });
}

void take_along_dim_backward(const Tensor& grad, const Tensor& indices, int64_t dim, const Tensor& out) {
  const char* op = "take_along_dim_backward";
  OpScope scope(op, &grad, &indices);
  if (out.numel() == 0) return;
  const int dev = out.device().index;
  brisk::cuda::DeviceGuard guard(dev);
  cudaStream_t stream = brisk::cuda::detail::current_native_stream(dev);
  brisk::cuda::detail::memset_async(out.data_ptr(), 0, out.nbytes(), stream);
  if (grad.numel() == 0) return;
  const ScanDimGeom gi = scan_dim_geom(grad.sizes(), dim), go = scan_dim_geom(out.sizes(), dim);
  static const int32_t code =
      brisk::cuda::detail::register_device_error("take_along_dim_backward: an index is out of range");
  visit_float(grad.dtype(), grad.device(), op, [&](auto tag) {
    using T = decltype(tag);
    launch(op, take_along_dim_backward_kernel<T>, dim3(grid_for(gi.outer * gi.inner, kScanColumnThreads, dev)),
           dim3(kScanColumnThreads), 0, stream, gi.outer, gi.n, go.n, gi.inner, static_cast<const T*>(grad.data_ptr()),
           static_cast<const int64_t*>(indices.data_ptr()), static_cast<T*>(out.data_ptr()),
           brisk::cuda::detail::device_error_slot(), code);
  });
}

}  // namespace brisk::kernels::cuda
