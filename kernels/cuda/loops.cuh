// The elementwise loop every pointwise CUDA kernel is built on (internal, nvcc only): one output
// and N inputs over the output's shape, any strides, inputs broadcast (stride 0). Values are
// loaded into their compute type (float for f16/bf16, see device/convert.h), passed to a device
// functor, and the result stored in the output's type.
//
// Two kernels: when every operand is contiguous with the output's shape and 16-byte aligned,
// each thread moves whole 128-bit vectors (device/vec.h) and a scalar loop finishes the tail;
// otherwise each element's offsets come from a StridedIndexer (device/indexing.h). Both walk
// their range with grid-stride loops, so any grid size covers all elements.
#pragma once
#include <array>
#include <utility>

#include "brisk/core/tensor.h"
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/indexing.h"
#include "brisk/kernels/device/vec.h"
#include "cuda/launch.cuh"

namespace brisk::cuda::detail {

inline constexpr int kElementwiseThreads = 256;

template <int N>
struct InputPtrs {
  const void* p[N > 0 ? N : 1];
};

template <class... Tin, class F, size_t... I>
__device__ __forceinline__ auto apply_strided(const F& f, const InputPtrs<sizeof...(Tin)>& in, const int64_t* off,
                                              std::index_sequence<I...>) {
  return f(kernels::device::to_acc(static_cast<const Tin*>(in.p[I])[off[I + 1]])...);
}

template <class Tout, class F, class... Tin>
__global__ void elementwise_strided_kernel(int64_t n, kernels::device::StridedIndexer<1 + sizeof...(Tin)> ix, Tout* out,
                                           InputPtrs<sizeof...(Tin)> in, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[1 + sizeof...(Tin)];
    ix.offsets(i, off);
    out[off[0]] = kernels::device::from_acc<Tout>(apply_strided<Tin...>(f, in, off, std::index_sequence_for<Tin...>{}));
  }
}

template <int W, class... Tin, class F, size_t... I>
__device__ __forceinline__ auto apply_lane(const F& f, const InputPtrs<sizeof...(Tin)>& in, int64_t vec, int lane,
                                           std::index_sequence<I...>) {
  return f(
      kernels::device::to_acc(kernels::device::load_vector<Tin, W>(static_cast<const Tin*>(in.p[I]), vec).v[lane])...);
}

template <class... Tin, class F, size_t... I>
__device__ __forceinline__ auto apply_flat(const F& f, const InputPtrs<sizeof...(Tin)>& in, int64_t i,
                                           std::index_sequence<I...>) {
  return f(kernels::device::to_acc(static_cast<const Tin*>(in.p[I])[i])...);
}

template <int W, class Tout, class F, class... Tin>
__global__ void elementwise_vector_kernel(int64_t n, Tout* out, InputPtrs<sizeof...(Tin)> in, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const kernels::device::VecSplit split = kernels::device::vec_split(n, W);
  for (int64_t v = tid; v < split.vectors; v += step) {
    kernels::device::AlignedVector<Tout, W> r;
#pragma unroll
    for (int l = 0; l < W; ++l)
      r.v[l] = kernels::device::from_acc<Tout>(apply_lane<W, Tin...>(f, in, v, l, std::index_sequence_for<Tin...>{}));
    kernels::device::store_vector<Tout, W>(out, v, r);
  }
  for (int64_t i = split.tail_begin + tid; i < n; i += step)
    out[i] = kernels::device::from_acc<Tout>(apply_flat<Tin...>(f, in, i, std::index_sequence_for<Tin...>{}));
}

// Blocks for `items` work items of one thread each (grid-stride loops cover the rest).
inline unsigned elementwise_blocks(int64_t items) {
  const int64_t cap = int64_t{multiprocessor_count(current_device())} * 32;
  int64_t b = (items + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(b, cap)));
}

// out[i] = f(in_0[i], ..., in_{N-1}[i]) over out's shape. Tout and Tin... are the storage types
// of out and the inputs (which must match the tensors' dtypes); f takes and returns compute
// types (acc_t). Inputs broadcast to out's shape. Launches on out's device's current stream.
template <class Tout, class... Tin, class F>
void launch_elementwise(const char* name, const Tensor& out, const std::array<const Tensor*, sizeof...(Tin)>& ins,
                        F f) {
  constexpr int N = sizeof...(Tin);
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_native_stream(out.device().index);
  InputPtrs<N> ptrs{};
  bool flat = out.is_contiguous();
  constexpr int W = kernels::device::vec_width<Tout>;
  bool aligned = kernels::device::is_aligned(out.data_ptr(), sizeof(Tout) * W);
  constexpr size_t in_sizes[N > 0 ? N : 1] = {sizeof(Tin)...};
  for (int k = 0; k < N; ++k) {
    ptrs.p[k] = ins[k]->data_ptr();
    flat = flat && ins[k]->sizes() == out.sizes() && ins[k]->is_contiguous();
    aligned = aligned && kernels::device::is_aligned(ptrs.p[k], in_sizes[k] * W);
  }
  Tout* po = static_cast<Tout*>(out.data_ptr());
  if (flat && aligned) {
    const int64_t items = kernels::device::vec_split(n, W).vectors + W;  // vectors, plus the tail
    launch(name, elementwise_vector_kernel<W, Tout, F, Tin...>, dim3(elementwise_blocks(items)),
           dim3(kElementwiseThreads), 0, stream, n, po, ptrs, f);
    return;
  }
  std::array<Strides, N + 1> strides;
  strides[0] = out.strides();
  for (int k = 0; k < N; ++k)
    strides[k + 1] = kernels::broadcast_strides(ins[k]->sizes(), ins[k]->strides(), out.sizes());
  const auto ix = kernels::device::make_indexer<N + 1>(out.sizes(), strides);
  launch(name, elementwise_strided_kernel<Tout, F, Tin...>, dim3(elementwise_blocks(n)), dim3(kElementwiseThreads), 0,
         stream, n, ix, po, ptrs, f);
}

}  // namespace brisk::cuda::detail
