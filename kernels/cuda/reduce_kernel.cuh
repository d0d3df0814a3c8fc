// The generic reduction kernel (internal, nvcc only): runs a ReducePlan (device/reduce_plan.h)
// with an op (identity, combine, push) and a store functor that writes an output from its
// combined accumulator. One launch when each output is reduced within a block; with splits, a
// first launch writes one partial per (split, output) to a workspace and a second combines them
// in split order, so results are deterministic for a given input shape and GPU.
#pragma once
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/kernels/device/reduce_plan.h"
#include "cuda/launch.cuh"

namespace brisk::cuda::detail {

namespace kd = kernels::device;

// Combines the group's lanes with the plan's tree; the result is valid in the group's leader
// (reduce_leader). Row: warp_reduce (lanes == 32) or block_reduce (one output per block).
// Column: a tree over threadIdx.y in shared memory. Every thread of the block must call it.
template <class Op, class Acc>
__device__ inline Acc reduce_group(const kd::ReducePlan& p, Acc a, Acc* scratch) {
  if (p.layout == kd::ReduceLayout::Row) {
    if (p.lanes == kd::kWarp) return kd::warp_reduce<Op>(a);
    return kd::block_reduce<Op>(a, scratch);
  }
  if (p.lanes == 1) return a;
  const unsigned x = threadIdx.x, y = threadIdx.y, bx = blockDim.x;
  scratch[y * bx + x] = a;
  __syncthreads();
  for (unsigned s = static_cast<unsigned>(p.lanes) / 2; s > 0; s >>= 1) {
    if (y < s) scratch[y * bx + x] = Op::combine(scratch[y * bx + x], scratch[(y + s) * bx + x]);
    __syncthreads();
  }
  return scratch[x];
}

// x: the input's first element, read through the plan's offsets. partials: (splits, n_out) when
// p.splits > 1, else unused (the leader stores the output directly).
template <class Op, class Store, class T, int W>
__global__ void __launch_bounds__(kd::kReduceMaxThreads)
    reduce_kernel(const kd::ReducePlan p, const T* __restrict__ x, const Op op, const Store store,
                  typename Op::Acc* __restrict__ partials) {
  using Acc = typename Op::Acc;
  __shared__ Acc scratch[kd::kReduceMaxThreads];
  const kd::ReduceRole role = kd::reduce_role(p, blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y);
  Acc a = Op::identity();
  kd::for_each_piece<W>(p, role, [&](int64_t off, int64_t r) {
    if constexpr (W == 1) {
      a = op.push(a, kd::to_acc(x[off]), role.out, r);
    } else {
      const kd::AlignedVector<T, W> v = *reinterpret_cast<const kd::AlignedVector<T, W>*>(x + off);
#pragma unroll
      for (int i = 0; i < W; ++i) a = op.push(a, kd::to_acc(v.v[i]), role.out, r + i);
    }
  });
  a = reduce_group<Op>(p, a, scratch);
  if (kd::reduce_leader(p, threadIdx.x, threadIdx.y) && role.out < p.n_out) {
    if (p.splits == 1)
      store(role.out, a);
    else
      partials[role.split * p.n_out + role.out] = a;
  }
}

// partials: (splits, n_out); one thread per output combines its splits in order.
template <class Op, class Store>
__global__ void reduce_splits_kernel(int64_t n_out, int64_t splits, const typename Op::Acc* __restrict__ partials,
                                     const Store store) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n_out; o += step)
    store(o, kd::combine_splits<Op>(partials, n_out, splits, o));
}

// The plan for reducing x over the `reduced` dims on its GPU.
inline kd::ReducePlan reduce_plan_for(const Tensor& x, const std::vector<bool>& reduced) {
  return kd::make_reduce_plan(x.sizes(), x.strides(), reduced, static_cast<int>(dtype_size(x.dtype())),
                              reinterpret_cast<uintptr_t>(x.data_ptr()), multiprocessor_count(x.device().index));
}

// Runs the plan on x (storage type T) on the current stream of x's device. The caller holds a
// DeviceGuard for that device.
template <class T, class Op, class Store>
void run_reduce(const char* name, const Tensor& x, const kd::ReducePlan& p, const Op& op, const Store& store) {
  using Acc = typename Op::Acc;
  if (p.n_out == 0) return;
  cudaStream_t stream = current_native_stream(x.device().index);
  const T* px = static_cast<const T*>(x.data_ptr());
  Tensor workspace;
  Acc* partials = nullptr;
  if (p.splits > 1) {
    // Freed at the end of this function; the caching allocator hands the block out again only
    // to work queued after these kernels on the same stream.
    workspace = empty({p.splits * p.n_out * static_cast<int64_t>(sizeof(Acc))}, DType::U8, x.device());
    partials = static_cast<Acc*>(workspace.data_ptr());
  }
  const dim3 grid(p.grid_x, p.grid_y), block(p.block_x, p.block_y);
  constexpr int W = kd::vec_width<T>;
  if constexpr (W > 1) {
    if (p.vec == W) {
      launch(name, reduce_kernel<Op, Store, T, W>, grid, block, 0, stream, p, px, op, store, partials);
    } else {
      launch(name, reduce_kernel<Op, Store, T, 1>, grid, block, 0, stream, p, px, op, store, partials);
    }
  } else {
    launch(name, reduce_kernel<Op, Store, T, 1>, grid, block, 0, stream, p, px, op, store, partials);
  }
  if (p.splits > 1) {
    constexpr int kThreads = 256;
    const int64_t cap = int64_t{multiprocessor_count(x.device().index)} * 8;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(kd::ceil_div(p.n_out, kThreads), cap));
    launch(name, reduce_splits_kernel<Op, Store>, dim3(blocks), dim3(kThreads), 0, stream, p.n_out, p.splits,
           static_cast<const Acc*>(partials), store);
  }
}

}  // namespace brisk::cuda::detail
