// Work plans of the CUDA nn kernels (layer norm, batch norm, cross entropy), written once for
// host and device: which thread visits which elements in which order, how rows and channels are
// cut into blocks, and the combine ops of their block trees. The CUDA kernels run these plans;
// the host tests (tests/cuda/test_device_nn.cpp) run the same plans through
// emulate_block_reduce and compare with the CPU kernels.
#pragma once
#include <cstdint>
#include <limits>

#include "brisk/core/macros.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/device/vec.h"

// nvcc's #pragma unroll in the device pass; nothing where a host compiler reads the code.
#if defined(__CUDA_ARCH__)
#define BRISK_DEVICE_UNROLL _Pragma("unroll")
#else
#define BRISK_DEVICE_UNROLL
#endif

namespace brisk::kernels::device {

// --- rows: a group of threads per contiguous row ----------------------------------------------

// Thread t of `threads` visits, in this order, the whole W-element vectors t, t + threads, ... of
// a contiguous row of n elements (vector v is elements [v * W, v * W + W)), then the tail
// elements tail_begin + t, tail_begin + t + threads, ... Every element is visited exactly once.
template <int W, class OnVector, class OnElement>
BRISK_HOST_DEVICE inline void for_each_owned(int64_t n, int t, int threads, OnVector&& on_vector,
                                             OnElement&& on_element) {
  const VecSplit s = vec_split(n, W);
  for (int64_t v = t; v < s.vectors; v += threads) on_vector(v);
  for (int64_t j = s.tail_begin + t; j < n; j += threads) on_element(j);
}

// out[j] = f(j, in[j]) for the elements of a contiguous row that thread t owns (for_each_owned's
// order), W at a time through aligned vectors: the last pass of a row kernel (layer norm's
// output, cross entropy's gradient).
template <int W, class T, class F>
BRISK_HOST_DEVICE inline void map_owned(int64_t n, int t, int threads, const T* in, T* out, F&& f) {
  for_each_owned<W>(
      n, t, threads,
      [&](int64_t v) {
        const AlignedVector<T, W> a = load_vector<T, W>(in, v);
        AlignedVector<T, W> o;
        BRISK_DEVICE_UNROLL
        for (int l = 0; l < W; ++l) o.v[l] = f(v * W + l, a.v[l]);
        store_vector<T, W>(out, v, o);
      },
      [&](int64_t j) { out[j] = f(j, in[j]); });
}

// Row kernels run blocks of (threads_per_row, rows_per_block) threads: enough threads per row
// (a multiple of 32, at most kMaxRowThreads) that each handles about 4 vectors, and enough rows
// per block to fill 256 threads when rows are short. The kernels declare
// __launch_bounds__(kMaxRowThreads), so the compiler keeps them within the registers a block
// that large may use.
inline constexpr int kMaxRowThreads = 512;
// Rows per block never exceed this (256 / 32), the per-row scratch the kernels keep.
inline constexpr int kMaxRowsPerBlock = 8;
struct RowPlan {
  int threads_per_row = 32;
  int rows_per_block = 8;
};
BRISK_HOST_DEVICE inline RowPlan row_plan(int64_t vectors_per_row) {
  RowPlan p;
  while (p.threads_per_row < kMaxRowThreads && int64_t{p.threads_per_row} * 4 < vectors_per_row) p.threads_per_row *= 2;
  p.rows_per_block = p.threads_per_row >= 256 ? 1 : 256 / p.threads_per_row;
  return p;
}

// Two sums carried through one tree (layer/batch norm backward: sum(g) and sum(g * xhat)).
template <class A>
struct Pair {
  A a;
  A b;
};
template <class A>
struct PairSumOp {
  BRISK_HOST_DEVICE static Pair<A> identity() { return {A(0), A(0)}; }
  BRISK_HOST_DEVICE static Pair<A> combine(Pair<A> x, Pair<A> y) { return {x.a + y.a, x.b + y.b}; }
};

// A row of logits in one pass: the online softmax state (running max, sum of exp(x - max)) and
// the plain sum of the logits (label smoothing's sum_c -logp[c] = C * lse - sum_c x[c]).
template <class A>
struct LogitsState {
  A max;
  A sum;
  A total;
};
template <class A>
struct LogitsOp {
  BRISK_HOST_DEVICE static LogitsState<A> identity() { return {-std::numeric_limits<A>::infinity(), A(0), A(0)}; }
  BRISK_HOST_DEVICE static LogitsState<A> push(LogitsState<A> s, A x) { return combine(s, {x, A(1), x}); }
  BRISK_HOST_DEVICE static LogitsState<A> combine(LogitsState<A> a, LogitsState<A> b) {
    const SoftmaxState<A> m = OnlineSoftmaxOp<A>::combine({a.max, a.sum}, {b.max, b.sum});
    return {m.max, m.sum, a.total + b.total};
  }
};

// --- column sums over rows (layer norm's dweight and dbias) ------------------------------------

// A (rows, D) matrix is summed over its rows in two kernels, without atomics. The first runs
// blocks of kColumnTile x kColumnLanes threads over (column tile, chunk of rows_per_chunk rows):
// lane (x, y) adds the chunk's rows y, y + kColumnLanes, ... (for_each_chunk_row) of column
// tile * kColumnTile + x, then the block adds its kColumnLanes partials in lane order. The
// second adds each column's chunk partials in chunk order.
inline constexpr int kColumnTile = 32;
inline constexpr int kColumnLanes = 8;
struct ColumnChunks {
  int64_t rows_per_chunk = 1;
  int64_t chunks = 1;
};
// At most 256 chunks of at least 64 rows: enough blocks to fill a GPU when there are many rows,
// and a short serial pass in the second kernel.
BRISK_HOST_DEVICE inline ColumnChunks column_chunks(int64_t rows) {
  ColumnChunks c;
  c.rows_per_chunk = (rows + 255) / 256;
  if (c.rows_per_chunk < 64) c.rows_per_chunk = 64;
  c.chunks = (rows + c.rows_per_chunk - 1) / c.rows_per_chunk;
  if (c.chunks < 1) c.chunks = 1;
  return c;
}
// Calls f(r) for the rows of `chunk` that row lane `lane` adds, in its order.
template <class F>
BRISK_HOST_DEVICE inline void for_each_chunk_row(const ColumnChunks& c, int64_t rows, int64_t chunk, int lane, F&& f) {
  const int64_t end = (chunk + 1) * c.rows_per_chunk < rows ? (chunk + 1) * c.rows_per_chunk : rows;
  for (int64_t r = chunk * c.rows_per_chunk + lane; r < end; r += kColumnLanes) f(r);
}

// --- layer norm backward in one pass: dx and the chunks' weight sums ---------------------------

// One kernel reads grad and x once for dx and for dweight/dbias: block b takes chunk b of the rows
// (column_chunks' cut) and runs rows_per_block row groups of `lanes` threads. Group g takes the
// chunk's rows g, g + rows_per_block, ... (for_each_group_row); lane t of every group owns the
// same pieces of every row (for_each_lane_piece: t, t + lanes, ..., at most max_pieces of them; a
// piece is a W-element vector, or one element when the rows are not read as vectors), so it keeps
// those columns' sums of grad * xhat and grad in registers across its rows. At the chunk's end the
// groups add their sums in group order into part[b] (the first group's sums, plus the second's,
// ...), and a second kernel adds each column's chunks in a fixed order (for_each_finish_chunk).
// Nothing depends on the GPU or on timing: the same shape gives the same bits.
// Sums a lane keeps: 32 columns of f32 each (16 of f64), two sums per column. Rows not read as
// vectors keep 8 (a lane's 32 scalar pieces, each loaded apart, made nvcc keep the sums in local
// memory instead of registers).
template <class A>
inline constexpr int kFusedColumnsPerLane = sizeof(A) > 4 ? 16 : 32;
// The most pieces of W elements (statistics type A) one lane owns.
template <class A, int W>
inline constexpr int kFusedPiecesPerLane = W > 1 ? kFusedColumnsPerLane<A> / W : 8;
struct FusedNormPlan {
  bool fits = false;       // false: the rows are too long for the registers (the split kernels run)
  int lanes = kWarp;       // threads per row: a power of two from 32 to kMaxRowThreads
  int rows_per_block = 8;  // lanes * rows_per_block = 256, or 1 row per block of 256 or 512 lanes
  ColumnChunks chunks;     // one block per chunk
};
// pieces: per row; max_pieces: the most one lane may own (kFusedPiecesPerLane).
BRISK_HOST_DEVICE inline FusedNormPlan fused_norm_plan(int64_t rows, int64_t pieces, int max_pieces) {
  FusedNormPlan p;
  while (p.lanes < kMaxRowThreads && int64_t{p.lanes} * max_pieces < pieces) p.lanes *= 2;
  p.fits = pieces > 0 && int64_t{p.lanes} * max_pieces >= pieces;
  p.rows_per_block = p.lanes >= 256 ? 1 : 256 / p.lanes;
  p.chunks = column_chunks(rows);
  return p;
}
// The rows of `chunk`: [begin, end).
struct RowRange {
  int64_t begin = 0, end = 0;
};
BRISK_HOST_DEVICE inline RowRange fused_chunk_rows(const FusedNormPlan& p, int64_t rows, int64_t chunk) {
  const int64_t begin = chunk * p.chunks.rows_per_chunk, end = begin + p.chunks.rows_per_chunk;
  return {begin, end < rows ? end : rows};
}
// f(r) for the rows of `chunk` that row group `group` takes, in its order (the kernel walks the
// same rows with its groups in step).
template <class F>
BRISK_HOST_DEVICE inline void for_each_group_row(const FusedNormPlan& p, int64_t rows, int64_t chunk, int group,
                                                 F&& f) {
  const RowRange range = fused_chunk_rows(p, rows, chunk);
  for (int64_t r = range.begin + group; r < range.end; r += p.rows_per_block) f(r);
}
// f(k, j): the lane's k-th piece is piece j of the row (k < MaxPieces, j < pieces). Unrolled on the
// device, so the lane's sums stay in registers indexed by k.
template <int MaxPieces, class F>
BRISK_HOST_DEVICE inline void for_each_lane_piece(int64_t pieces, int lane, int lanes, F&& f) {
  BRISK_DEVICE_UNROLL
  for (int k = 0; k < MaxPieces; ++k) {
    const int64_t j = lane + static_cast<int64_t>(k) * lanes;
    if (j < pieces) f(k, j);
  }
}
// The second kernel: blocks of kColumnTile x kFinishLanes threads, one column tile each; lane y
// adds chunks y, y + kFinishLanes, ... of its column (for_each_finish_chunk), then the block adds
// its lanes in lane order.
inline constexpr int kFinishLanes = 16;
template <class F>
BRISK_HOST_DEVICE inline void for_each_finish_chunk(int64_t chunks, int lane, F&& f) {
  for (int64_t k = lane; k < chunks; k += kFinishLanes) f(k);
}

// --- channels (batch norm) ---------------------------------------------------------------------

// Batch norm reduces each channel c of x: (N, C, S) contiguous over its m = N * S elements
// (element e at (e / S) * C * S + c * S + e % S). Each channel is cut into `chunks` runs of
// `per_chunk` elements, one block of kChannelThreads each; thread t of a block visits its run's
// elements t, t + kChannelThreads, ... (for_each_chunk_element); the block combines its threads
// with block_reduce and a second kernel combines each channel's chunks in chunk order.
inline constexpr int kChannelThreads = 256;
struct ChannelChunks {
  int64_t per_chunk = 1;
  int64_t chunks = 1;
};
// At most 64 chunks of at least 4096 elements; the cut depends only on m, never on the GPU.
BRISK_HOST_DEVICE inline ChannelChunks channel_chunks(int64_t m) {
  ChannelChunks c;
  c.chunks = (m + 4095) / 4096;
  if (c.chunks > 64) c.chunks = 64;
  if (c.chunks < 1) c.chunks = 1;
  c.per_chunk = (m + c.chunks - 1) / c.chunks;
  if (c.per_chunk < 1) c.per_chunk = 1;
  return c;
}
template <class F>
BRISK_HOST_DEVICE inline void for_each_chunk_element(const ChannelChunks& c, int64_t m, int64_t chunk, int t, F&& f) {
  const int64_t end = (chunk + 1) * c.per_chunk < m ? (chunk + 1) * c.per_chunk : m;
  for (int64_t e = chunk * c.per_chunk + t; e < end; e += kChannelThreads) f(e);
}

}  // namespace brisk::kernels::device
