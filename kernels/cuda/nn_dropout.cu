// CUDA dropout: one thread per block of 4 elements draws one Philox block and keeps or drops its
// elements with device/dropout.h, the function the CPU loop calls, so a seed gives the same
// mask (and, with the same f32 scaling, the same output bits) on both.
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/dropout.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/loops.cuh"
#include "cuda/nn.h"
#include "cuda/nn_common.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace rt = brisk::cuda::detail;
namespace dv = brisk::kernels::device;

// x, y, mask: (n) contiguous, `=`. Item b covers elements [4b, 4b + 4).
template <class T>
__global__ void dropout_kernel(int64_t n, uint64_t seed, uint64_t base, float p, acc_t<T> scale,
                               const T* __restrict__ x, T* __restrict__ y, bool* __restrict__ mask) {
  const int64_t blocks = (n + 3) / 4;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += step) {
    bool keep[4];
    dv::dropout_keep4(seed, base, b, p, keep);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int64_t i = b * 4 + l;
      if (i >= n) break;
      mask[i] = keep[l];
      y[i] = keep[l] ? dv::from_acc<T>(dv::to_acc(x[i]) * scale) : dv::from_acc<T>(acc_t<T>(0));
    }
  }
}

template <class T>
struct DropoutGradOp {
  acc_t<T> scale;
  __device__ acc_t<T> operator()(acc_t<T> g, bool keep) const { return keep ? g * scale : acc_t<T>(0); }
};

}  // namespace

void dropout(const Tensor& x, double p, uint64_t seed, uint64_t base, const Tensor& y, const Tensor& mask) {
  OpScope scope("dropout", &x);
  const int64_t n = x.numel();
  if (n == 0) return;
  const int device = x.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  visit_float(x.dtype(), x.device(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    rt::launch("dropout", dropout_kernel<T>, dim3(nn_common::grid_for((n + 3) / 4, device)), dim3(256), 0, stream, n,
               seed, base, static_cast<float>(p), static_cast<acc_t<T>>(scale), static_cast<const T*>(x.data_ptr()),
               static_cast<T*>(y.data_ptr()), static_cast<bool*>(mask.data_ptr()));
  });
}

void dropout_backward(const Tensor& grad, const Tensor& mask, double scale, const Tensor& out) {
  OpScope scope("dropout backward", &grad, &mask);
  visit_float(grad.dtype(), grad.device(), "dropout backward", [&](auto tag) {
    using T = decltype(tag);
    rt::launch_elementwise<T, T, bool>("dropout_backward", out, {&grad, &mask},
                                       DropoutGradOp<T>{static_cast<acc_t<T>>(scale)});
  });
}

}  // namespace brisk::kernels::cuda
