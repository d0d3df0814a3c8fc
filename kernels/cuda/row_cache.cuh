// A row held on chip while a row kernel (softmax, log_softmax, layer_norm) makes its passes over
// it, so the row is read from memory once and written once: the kernel is then as fast as a copy
// of the same bytes. Piece j of the row (W elements, a 128-bit vector) belongs to lane
// j % lanes of the row's thread group. Rows of at most kRowRegisterPieces pieces per lane live in
// registers; longer ones (one row per block) in the block's dynamic shared memory, up to what the
// GPU gives one block. Rows that fit neither are streamed by the kernels' older paths.
#pragma once
#include <cuda_runtime.h>

#include "brisk/kernels/device/vec.h"
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

// The block's dynamic shared memory, 16-byte aligned (one declaration for every kernel).
__device__ inline unsigned char* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char row_cache_smem[];
  return row_cache_smem;
}

// How a row kernel holds its rows: in registers (lanes as planned), in shared memory (one row per
// block of kSharedLanes threads, `smem_bytes` of it), or not at all.
enum class Hold { Registers, Shared, None };
struct HoldPlan {
  Hold hold = Hold::None;
  size_t smem_bytes = 0;
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
  const int optin = brisk::cuda::detail::shared_memory_optin(device);
  // Leave room for the kernels' static shared memory (a few hundred bytes).
  const size_t bytes = static_cast<size_t>(pieces) * piece_bytes;
  if (optin > 0 && bytes + 1024 <= static_cast<size_t>(optin)) {
    h.hold = Hold::Shared;
    h.smem_bytes = bytes;
  }
  return h;
}

}  // namespace brisk::kernels::cuda::row_cache
