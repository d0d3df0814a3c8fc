// Pieces shared by the CUDA index and nn kernels (internal, nvcc only): reporting bad index
// values through the device-error slot, grid sizes for grid-stride loops, copying whole rows
// picked by an index (index_select, embedding), and a stable sort of index values (the
// deterministic scatter-adds of embedding_backward and index_add_).
#pragma once
#include <cuda_runtime.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "brisk/core/half.h"
#include "brisk/core/tensor.h"
#include "brisk/kernels/device/index.h"
#include "cuda/launch.cuh"

namespace brisk::kernels::cuda::common {

namespace rt = brisk::cuda::detail;
using device::IndexDiv;
using Slot = rt::DeviceErrorSlot;

inline constexpr int kThreads = 256;

// Blocks of kThreads for `items` work items of a grid-stride loop: one item per thread, capped at
// 32 blocks per multiprocessor (the loop covers the rest).
inline unsigned grid_for(int64_t items, int device) {
  const int64_t cap = int64_t{rt::multiprocessor_count(device)} * 32;
  int64_t b = (items + kThreads - 1) / kThreads;
  if (b > cap) b = cap;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b);
}

// Records a bad value in the device-error slot, which the host turns into a brisk::Error the next
// time it waits for the GPU. Plain stores: when several threads race, one value survives, which
// is all the message needs. The slot lives in mapped host memory, so it is read first: only
// threads that found an error touch it at all.
__device__ inline void report_bad_value(Slot* slot, int32_t code, int64_t value, int64_t limit) {
  volatile Slot* s = slot;
  if (s->code != 0) return;
  s->value = value;
  s->limit = limit;
  __threadfence_system();
  s->code = code;
}

// True when 0 <= v < limit.
template <class I>
__device__ __forceinline__ bool in_range(I v, int64_t limit) {
  return v >= 0 && static_cast<int64_t>(v) < limit;
}

// atomicAdd for the types the hardware adds atomically (16-bit floats on sm_80 and later); the
// scatter-adds use it only when kernels::deterministic() is off.
template <class T>
inline constexpr bool kHasAtomicAdd =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
template <class T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, Half>) {
    atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(v.bits));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(v.bits));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    // Two's complement: an unsigned add gives the signed sum (wrapping like the CPU's).
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(p, v);
  }
}

// Copies rows picked by an index (internal launcher shared by index_select and embedding).
// x: contiguous (pre, mid, post); idx: contiguous (n) i32/i64 with values in [0, mid) (a bad one
// is reported under `error_code` and its output row zeroed); out: contiguous (pre, n, post) of
// x's dtype. Launches on the current stream of x's device.
void index_rows(const Tensor& x, const Tensor& idx, int64_t pre, int64_t mid, int64_t post, const Tensor& out,
                int32_t error_code);

// Index values in ascending order with their positions; equal values keep their input order
// (a stable radix sort), so a scatter-add that walks `positions` within a run of equal keys adds
// in index order, as the CPU does.
struct SortedIndex {
  Tensor keys;       // (n) i32: the sorted values; a value outside [0, limit) becomes `limit` (sorted last)
  Tensor positions;  // (n) i32: the input position of each sorted key
};
// idx: contiguous (n) i32/i64 on the current device; limit and n below 2^31 - 1. A value outside
// [0, limit) is reported under `error_code`. Runs on the current stream; no host synchronisation.
SortedIndex sort_index(const Tensor& idx, int64_t limit, int32_t error_code);

}  // namespace brisk::kernels::cuda::common
