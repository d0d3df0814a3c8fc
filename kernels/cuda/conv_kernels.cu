// The conv family's own kernel around cuDNN: the bias gradient (a per-channel sum, one block per
// channel with a fixed reduction tree, so the result is the same on every run).
#include "brisk/kernels/device/pool.h"
#include "brisk/kernels/device/reduce.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/conv.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda::detail {

namespace {

namespace bd = brisk::cuda::detail;

constexpr int kConvThreads = 256;

// gy: (N, C, HW) contiguous; gb: (C) contiguous; `=`. Block c sums channel c (device/pool.h's
// channel_element order, then block_reduce's tree).
template <class T, class A>
__global__ void channel_sum_kernel(int64_t n, int64_t channels, int64_t hw, const T* gy, T* gb) {
  __shared__ A scratch[32];
  const int64_t c = blockIdx.x;
  const int64_t count = n * hw;
  A s = A(0);
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x)
    s += device::to_acc(gy[device::channel_element(e, c, channels, hw)]);
  s = device::block_reduce<device::SumOp<A>>(s, scratch);
  if (threadIdx.x == 0) gb[c] = device::from_acc<T>(s);
}

}  // namespace

void channel_sums(const Tensor& gy, const Tensor& gb) {
  const int64_t channels = gy.size(1);
  if (channels == 0) return;
  const int64_t n = gy.size(0), hw = gy.numel() / std::max<int64_t>(1, n * channels);
  const cudaStream_t stream = bd::current_native_stream(gb.device().index);
  visit_float(gb.dtype(), gb.device(), "conv2d_backward (bias)", [&](auto tag) {
    using T = decltype(tag);
    bd::launch("conv2d_bias_grad", channel_sum_kernel<T, acc_t<T>>, dim3(static_cast<unsigned>(channels)),
               dim3(kConvThreads), 0, stream, n, channels, hw, gy.data<T>(), gb.data<T>());
  });
}

}  // namespace brisk::kernels::cuda::detail
