// A row held on chip while a row kernel (softmax, log_softmax, layer_norm) makes its passes over
// it, so the row is read from memory once and written once: the kernel is then as fast as a copy
// of the same bytes. Piece j of the row (W elements, a 128-bit vector) belongs to lane
// j % lanes of the row's thread group. Rows of at most kRowRegisterPieces pieces per lane live in
// registers; longer ones (one row per block) in the block's dynamic shared memory, up to what the
// GPU gives one block. Rows that fit neither are streamed by the kernels' older paths.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/vec.h"
#include "brisk/util/env.h"
#include "cuda/runtime.h"

namespace brisk::kernels::cuda::row_cache {

namespace kd = kernels::device;

// Pieces one lane keeps in registers: 8 vectors of 16 bytes = 32 registers. Register-held rows
// run in blocks of at most kMaxRegisterThreads threads, so each may use 128 registers (at 1024
// threads, 64, and the 16-bit kernels spill).
inline constexpr int kRowRegisterPieces = 8;
inline constexpr int kMaxRegisterThreads = 512;
// Lanes of a row whose pieces live in shared memory (one row per block).
inline constexpr int kSharedLanes = 1024;

// a + b element by element, each sum rounded to T as the binary add rounds it (computed in
// acc_t<T>, rounded once): the residual add of add_layer_norm.
template <class T, int W>
__device__ __forceinline__ kd::AlignedVector<T, W> add_pieces(const kd::AlignedVector<T, W>& a,
                                                              const kd::AlignedVector<T, W>& b) {
  kd::AlignedVector<T, W> s;
#pragma unroll
  for (int l = 0; l < W; ++l) s.v[l] = kd::from_acc<T>(kd::to_acc(a.v[l]) + kd::to_acc(b.v[l]));
  return s;
}

template <class T, int W, bool Shared>
struct RowCache {
  using Vec = kd::AlignedVector<T, W>;
  Vec reg[Shared ? 1 : kRowRegisterPieces];
  Vec* smem = nullptr;  // Shared: the row's pieces, piece j at smem[j]
  int64_t pieces = 0;   // W-element vectors in the row
  int lane = 0, lanes = 1;

  // Reads the row (row[0 .. pieces * W)); every piece this lane owns, in order.
  __device__ void load(const T* __restrict__ row) {
    if constexpr (Shared) {
      int64_t j = lane;
      // Four loads in flight per lane before their stores: enough memory parallelism with one
      // block of 1024 threads per multiprocessor.
      for (; j + 3 * static_cast<int64_t>(lanes) < pieces; j += 4 * static_cast<int64_t>(lanes)) {
        Vec a[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) a[u] = kd::load_vector<T, W>(row, j + u * static_cast<int64_t>(lanes));
#pragma unroll
        for (int u = 0; u < 4; ++u) smem[j + u * static_cast<int64_t>(lanes)] = a[u];
      }
      for (; j < pieces; j += lanes) smem[j] = kd::load_vector<T, W>(row, j);
    } else {
#pragma unroll
      for (int k = 0; k < kRowRegisterPieces; ++k) {
        const int64_t j = lane + static_cast<int64_t>(k) * lanes;
        if (j < pieces) reg[k] = kd::load_vector<T, W>(row, j);
      }
    }
  }

  // Holds the row a + b (add_pieces) instead, writing it to `sum` as well: a and b are read once.
  __device__ void load_sum(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ sum) {
    auto piece = [&](int64_t j) {
      const Vec v = add_pieces<T, W>(kd::load_vector<T, W>(a, j), kd::load_vector<T, W>(b, j));
      kd::store_vector<T, W>(sum, j, v);
      return v;
    };
    if constexpr (Shared) {
      for (int64_t j = lane; j < pieces; j += lanes) smem[j] = piece(j);
    } else {
#pragma unroll
      for (int k = 0; k < kRowRegisterPieces; ++k) {
        const int64_t j = lane + static_cast<int64_t>(k) * lanes;
        if (j < pieces) reg[k] = piece(j);
      }
    }
  }

  // f(first element index of the piece, the piece) for every piece this lane owns.
  template <class F>
  __device__ void for_each(F&& f) const {
    if constexpr (Shared) {
      for (int64_t j = lane; j < pieces; j += lanes) f(j * W, smem[j]);
    } else {
#pragma unroll
      for (int k = 0; k < kRowRegisterPieces; ++k) {
        const int64_t j = lane + static_cast<int64_t>(k) * lanes;
        if (j < pieces) f(j * W, reg[k]);
      }
    }
  }
};

// --- rows split over a thread-block cluster (sm_90+) ---------------------------------------------
// A row too long for one block's registers is cut into `cluster` chunks, one per block of a
// cluster (each chunk in that block's registers); the blocks combine their partial results
// through distributed shared memory, in rank order (the same order every run).
// Blocks of 256 lanes, at least 4 of them per multiprocessor (at most 64 registers per thread),
// so one block's loads overlap others' reductions and writes; a chunk is up to 2,048 pieces.
inline constexpr int kClusterLanes = 256;
inline constexpr int kClusterBlocksPerSm = 4;
inline constexpr int kMaxCluster = 8;  // the portable cluster size

// Combines each block's `value` (the same in every thread of the block) over the cluster, in
// block-rank order; every thread gets the result. `slot`: one A of the block's shared memory.
// The other blocks read this block's slot, so it must outlive their reads. With `split` false a
// second full cluster barrier waits for every read before returning (the kernel then writes its
// chunk). With `split` true each thread only signals that its reads are done (the barrier's
// arrive) and the kernel calls cluster_release(true) after its writes, just before it exits (the
// wait): the writes overlap the barrier instead of following it.
template <class Op, class A>
__device__ inline A cluster_combine(A value, A* slot, bool split) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0 && threadIdx.y == 0) *slot = value;
  cluster.sync();
  A v = Op::identity();
  for (unsigned r = 0; r < cluster.num_blocks(); ++r) v = Op::combine(v, *cluster.map_shared_rank(slot, r));
  if (split)
    asm volatile("barrier.cluster.arrive;" ::: "memory");  // release: this thread's reads are done
  else
    cluster.sync();  // every block has read every slot before any is rewritten or its block exits
  return v;
#else
  __trap();  // launched only on sm_90 and newer
  return value;
#endif
}
// The other half of a split cluster_combine: waits until every thread of the cluster has read the
// slots (nothing when `split` is false). Every thread calls it once, after its last write.
__device__ inline void cluster_release(bool split) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (split) asm volatile("barrier.cluster.wait;" ::: "memory");
#endif
}
// BRISK_CUDA_ROW_SPLIT_BARRIER=0 (read at each call) runs cluster_combine with two full barriers,
// as before the split, to time one against the other.
inline bool split_barrier_enabled() {
  return brisk::envvar::get_bool("BRISK_CUDA_ROW_SPLIT_BARRIER", true);
}
// The block's rank in its cluster and the cluster's size (0 and 1 before sm_90).
__device__ inline unsigned cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().block_rank();
#else
  return 0;
#endif
}
__device__ inline unsigned cluster_size() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().num_blocks();
#else
  return 1;
#endif
}

// The block's dynamic shared memory, 16-byte aligned (one declaration for every kernel).
__device__ inline unsigned char* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char row_cache_smem[];
  return row_cache_smem;
}

// How a row kernel holds its rows: in registers (lanes as planned), in shared memory (one row per
// block of kSharedLanes threads, `smem_bytes` of it), or not at all.
enum class Hold { Registers, Cluster, Shared, None };
struct HoldPlan {
  Hold hold = Hold::None;
  size_t smem_bytes = 0;
  unsigned cluster = 1;      // Cluster: blocks per row
  int64_t chunk_pieces = 0;  // Cluster: pieces per block (the last block may have fewer)
};
// pieces: vectors per row (0 when the rows cannot be read as vectors); lanes: the lanes per row
// the kernel's plan chose (blocks of at most kMaxRegisterThreads threads when held in registers).
inline HoldPlan plan_hold(int64_t pieces, int lanes, size_t piece_bytes, int device) {
  HoldPlan h;
  if (pieces <= 0) return h;
  if (lanes <= kMaxRegisterThreads && pieces <= static_cast<int64_t>(lanes) * kRowRegisterPieces) {
    h.hold = Hold::Registers;
    return h;
  }
  // Clusters (Hopper and newer): 2 to 8 blocks of kClusterLanes lanes, each chunk in registers.
  // BRISK_CUDA_ROW_CLUSTERS=0 turns them off (to run the shared-memory path of older GPUs on a
  // Hopper, as scripts/gpu-check.sh does for the every-op test).
  static const bool clusters_allowed = brisk::envvar::get_bool("BRISK_CUDA_ROW_CLUSTERS", true);
  if (clusters_allowed && brisk::cuda::detail::compute_capability_major(device) >= 9) {
    const int64_t per_block = int64_t{kClusterLanes} * kRowRegisterPieces;
    const int64_t blocks = (pieces + per_block - 1) / per_block;
    if (blocks >= 2 && blocks <= kMaxCluster) {
      h.hold = Hold::Cluster;
      h.cluster = static_cast<unsigned>(blocks <= 2 ? 2 : blocks <= 4 ? 4 : 8);
      h.chunk_pieces = (pieces + h.cluster - 1) / h.cluster;
      return h;
    }
  }
  const int optin = brisk::cuda::detail::shared_memory_optin(device);
  // Leave room for the kernels' static shared memory (at most ~2 KiB).
  const size_t bytes = static_cast<size_t>(pieces) * piece_bytes;
  if (optin > 0 && bytes + 4096 <= static_cast<size_t>(optin)) {
    h.hold = Hold::Shared;
    h.smem_bytes = bytes;
  }
  return h;
}

}  // namespace brisk::kernels::cuda::row_cache
