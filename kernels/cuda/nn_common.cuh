// Pieces shared by the CUDA nn kernels (internal, nvcc only): the launch shape of row kernels
// (a group of threads per contiguous row, device/nn.h's RowPlan, 128-bit loads when every row
// is aligned) and the math functions of the statistics type (f32, or f64 for f64 data).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "brisk/core/tensor.h"
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/nn.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/device/vec.h"
#include "cuda/launch.cuh"

namespace brisk::kernels::cuda::nn_common {

namespace rt = brisk::cuda::detail;

using kernels::device::kMaxRowsPerBlock;

struct RowLaunch {
  bool vectorized = false;  // 128-bit loads: every row starts 16-byte aligned
  dim3 grid, block;
};
// The launch of a row kernel over `rows` rows of `cols` contiguous elements of `element_size`
// bytes; `ptrs` are the row-major buffers it reads or writes row by row (null ones ignored).
inline RowLaunch row_launch(int64_t rows, int64_t cols, size_t element_size, std::initializer_list<const void*> ptrs,
                            int device) {
  RowLaunch l;
  const int64_t width = static_cast<int64_t>(16 / element_size);
  l.vectorized = cols % width == 0;
  for (const void* p : ptrs) l.vectorized = l.vectorized && (p == nullptr || kernels::device::is_aligned(p, 16));
  const kernels::device::RowPlan plan = kernels::device::row_plan(l.vectorized ? cols / width : cols);
  l.block = dim3(static_cast<unsigned>(plan.threads_per_row), static_cast<unsigned>(plan.rows_per_block));
  const int64_t groups = (rows + plan.rows_per_block - 1) / plan.rows_per_block;
  const int64_t cap = int64_t{rt::multiprocessor_count(device)} * 8;
  l.grid = dim3(static_cast<unsigned>(groups < 1 ? 1 : groups < cap ? groups : cap));
  return l;
}

// Blocks of 256 threads for a grid-stride loop over `items` (at most 32 per multiprocessor).
inline unsigned grid_for(int64_t items, int device) {
  const int64_t cap = int64_t{rt::multiprocessor_count(device)} * 32;
  int64_t b = (items + 255) / 256;
  if (b > cap) b = cap;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b);
}

// The statistics type's functions (float overloads for float, so nothing is computed in double).
template <class A>
__device__ __forceinline__ A exp_a(A v) {
  if constexpr (std::is_same_v<A, float>)
    return expf(v);
  else
    return exp(v);
}
template <class A>
__device__ __forceinline__ A log_a(A v) {
  if constexpr (std::is_same_v<A, float>)
    return logf(v);
  else
    return log(v);
}
// 1 / sqrt(v) rounded as the CPU's A(1) / std::sqrt(v) (rsqrt is an approximation).
template <class A>
__device__ __forceinline__ A inv_sqrt(A v) {
  if constexpr (std::is_same_v<A, float>)
    return 1.0f / sqrtf(v);
  else
    return 1.0 / sqrt(v);
}

// A tensor's data as T (null for an undefined tensor: an output not asked for, an absent weight).
template <class T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <class T>
T* mptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// Op's reduction of v over a row's lanes (blockDim.x of them), in every lane: a warp's shuffles
// when the row has one warp, else the block tree (every thread of the block calls it) and a
// broadcast through `total`.
template <class Op, class A>
__device__ inline A row_reduce(A v, A* scratch, A* total) {
  if (blockDim.x == device::kWarp) return device::warp_reduce<Op>(v);
  v = device::block_reduce<Op>(v, scratch);
  if (threadIdx.x == 0) *total = v;
  __syncthreads();
  return *total;
}

}  // namespace brisk::kernels::cuda::nn_common
