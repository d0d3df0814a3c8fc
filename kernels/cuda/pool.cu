// 2-D pooling on the GPU: max (values and i64 argmax indices), average and adaptive average,
// forward and backward. The per-element math is device/pool.h's, shared with the host tests,
// and follows the CPU kernels' order of operations, so results match the CPU's bit for bit
// (f16/bf16 compute in f32 and round once). Forward kernels: one thread per output. Backward
// kernels gather: one thread per input element sums the outputs whose windows contain it, in
// output order, so no atomics and a deterministic result. Max-pool backward cannot gather (it
// only has indices), so one warp owns each plane and adds its outputs in output order.
// Inputs may have any strides; outputs are contiguous.
#include <algorithm>
#include <type_traits>

#include "brisk/kernels/device/pool.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/conv.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace bd = brisk::cuda::detail;
using device::NchwStrides;
using device::PoolShape;

constexpr int kPoolThreads = 256;
constexpr int kWarpsPerBlock = kPoolThreads / 32;

NchwStrides nchw(const Tensor& t) {
  return {t.size(1), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

// Reads plane `base` of a strided (N, C, H, W) tensor in the compute type.
template <class T>
struct PlaneLoader {
  const T* p;
  int64_t base, sh, sw;
  __device__ acc_t<T> operator()(int64_t y, int64_t x) const { return device::to_acc(p[base + y * sh + x * sw]); }
};

template <class T>
__device__ PlaneLoader<T> loader(const T* p, const NchwStrides& s, int64_t plane) {
  return {p, s.plane(plane), s.sh, s.sw};
}

// o -> (plane, row, col) of a (planes, rows, cols) grid.
struct Pos {
  int64_t plane, y, x;
};
__device__ inline Pos split(int64_t o, int64_t rows, int64_t cols) {
  const int64_t per_plane = rows * cols;
  const int64_t plane = o / per_plane, r = o - plane * per_plane, y = r / cols;
  return {plane, y, r - y * cols};
}

#define BRISK_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// x: (N, C, H, W) any strides; values, indices: (planes, OH, OW) contiguous; `=`.
template <class T>
__global__ void max_pool_kernel(PoolShape g, int64_t total, const T* x, NchwStrides xs, T* values, int64_t* indices) {
  BRISK_GRID_STRIDE(o, total) {
    const Pos p = split(o, g.oh, g.ow);
    const auto m = device::max_window<acc_t<T>>(g, p.y, p.x, loader(x, xs, p.plane));
    values[o] = device::from_acc<T>(m.value);
    indices[o] = m.index;
  }
}

__device__ inline void report_bad_index(bd::DeviceErrorSlot* slot, int32_t code, int64_t value, int64_t limit) {
  if (atomicCAS(&slot->code, 0, code) == 0) {
    slot->value = value;
    slot->limit = limit;
  }
}

// gy, idx: (N, C, OH, OW) any strides; acc: (planes, in_plane) contiguous, zeroed before; `+=`.
// One warp per plane (blockDim.x == kPoolThreads): 32 outputs at a time in output order; lanes whose
// outputs hit the same input element are added by the lowest of them in lane order, so every
// element receives its gradients in the CPU's order and no two lanes write one address at once.
template <class T, class A>
__global__ void max_pool_backward_kernel(int64_t planes, int64_t oh, int64_t ow, int64_t in_plane, const T* gy,
                                         NchwStrides gs, const int64_t* idx, NchwStrides is, A* acc,
                                         bd::DeviceErrorSlot* err, int32_t err_code) {
  __shared__ A vals[kWarpsPerBlock][32];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t out_plane = oh * ow;
  // Loops are uniform across the warp: __match_any_sync needs every lane.
  for (int64_t plane = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp; plane < planes;
       plane += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    A* accp = acc + plane * in_plane;
    for (int64_t base = 0; base < out_plane; base += 32) {
      const int64_t o = base + lane;
      int64_t target = -1;
      A v = A(0);
      if (o < out_plane) {
        const int64_t y = o / ow, x = o - y * ow;
        const int64_t t = idx[is.at(plane, y, x)];
        v = device::to_acc(gy[gs.at(plane, y, x)]);
        if (t >= 0 && t < in_plane)
          target = t;
        else
          report_bad_index(err, err_code, t, in_plane);
      }
      vals[warp][lane] = v;
      const unsigned peers = __match_any_sync(0xffffffffu, target);
      __syncwarp();  // vals visible to the group leaders
      if (target >= 0 && lane == __ffs(static_cast<int>(peers)) - 1)
        device::add_peers_in_order(accp, target, peers, vals[warp]);
      __syncwarp();  // this group's sums land before the next group reads them; vals reusable
    }
  }
}

// x: (N, C, H, W) any strides; y: (planes, OH, OW) contiguous; `=`.
template <class T>
__global__ void avg_pool_kernel(PoolShape g, bool cip, int64_t total, const T* x, NchwStrides xs, T* y) {
  using A = acc_t<T>;
  BRISK_GRID_STRIDE(o, total) {
    const Pos p = split(o, g.oh, g.ow);
    const device::AvgWindow win = device::avg_window(g, cip, p.y, p.x);
    const A s = device::window_sum<A>(win.h0, win.h1, win.w0, win.w1, loader(x, xs, p.plane));
    y[o] = device::from_acc<T>(win.divisor > 0 ? s / static_cast<A>(win.divisor) : A(0));
  }
}

// gy: (N, C, OH, OW) any strides; gx: (planes, H, W) contiguous; `=`.
template <class T>
__global__ void avg_pool_backward_kernel(PoolShape g, bool cip, int64_t total, const T* gy, NchwStrides gs, T* gx) {
  BRISK_GRID_STRIDE(i, total) {
    const Pos p = split(i, g.h, g.w);
    gx[i] = device::from_acc<T>(device::avg_backward_at<acc_t<T>>(g, cip, p.y, p.x, loader(gy, gs, p.plane)));
  }
}

// x: (N, C, H, W) any strides; y: (planes, OH, OW) contiguous; `=`.
template <class T>
__global__ void adaptive_avg_kernel(PoolShape g, int64_t total, const T* x, NchwStrides xs, T* y) {
  BRISK_GRID_STRIDE(o, total) {
    const Pos p = split(o, g.oh, g.ow);
    y[o] = device::from_acc<T>(device::adaptive_avg_at<acc_t<T>>(g, p.y, p.x, loader(x, xs, p.plane)));
  }
}

// gy: (N, C, OH, OW) any strides; gx: (planes, H, W) contiguous; `=`.
template <class T>
__global__ void adaptive_avg_backward_kernel(PoolShape g, int64_t total, const T* gy, NchwStrides gs, T* gx) {
  BRISK_GRID_STRIDE(i, total) {
    const Pos p = split(i, g.h, g.w);
    gx[i] = device::from_acc<T>(device::adaptive_avg_backward_at<acc_t<T>>(g, p.y, p.x, loader(gy, gs, p.plane)));
  }
}

#undef BRISK_GRID_STRIDE

template <class A>
struct PoolIdentity {
  __device__ A operator()(A v) const { return v; }
};

dim3 grid_for(int64_t items) {
  return dim3(bd::elementwise_blocks(items));
}

PoolShape adaptive_shape(const Tensor& in, const Tensor& out) {
  PoolShape g;
  g.h = in.size(2), g.w = in.size(3), g.oh = out.size(2), g.ow = out.size(3);
  return g;
}

}  // namespace

void max_pool2d(const PoolShape& g, const Tensor& x, const Tensor& values, const Tensor& indices) {
  OpScope scope("max_pool2d", &x);
  const int64_t total = values.numel();
  if (total == 0) return;
  brisk::cuda::DeviceGuard guard(x.device().index);
  const cudaStream_t stream = bd::current_native_stream(x.device().index);
  visit_float(x.dtype(), x.device(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    bd::launch("max_pool2d", max_pool_kernel<T>, grid_for(total), dim3(kPoolThreads), 0, stream, g, total, x.data<T>(),
               nchw(x), values.data<T>(), indices.data<int64_t>());
  });
}

void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx) {
  OpScope scope("max_pool2d_backward", &gy, &indices);
  if (gx.numel() == 0) return;
  const int device = gx.device().index;
  brisk::cuda::DeviceGuard guard(device);
  const cudaStream_t stream = bd::current_native_stream(device);
  const int64_t planes = gx.size(0) * gx.size(1), in_plane = gx.size(2) * gx.size(3);
  static const int32_t err_code = bd::register_device_error("max_pool2d_backward: index out of range");
  visit_float(gx.dtype(), gx.device(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    // f32/f64 accumulate in gx itself; f16/bf16 in an f32 scratch rounded once at the end (as the CPU).
    constexpr bool direct = std::is_same_v<A, T>;
    Tensor acc = direct ? gx : empty(gx.sizes(), DType::F32, gx.device());
    bd::memset_async(acc.data_ptr(), 0, acc.nbytes(), stream);
    if (gy.numel() > 0) {
      const unsigned blocks = static_cast<unsigned>(
          std::max<int64_t>(1, std::min<int64_t>((planes + kWarpsPerBlock - 1) / kWarpsPerBlock,
                                                 int64_t{bd::multiprocessor_count(device)} * 32)));
      bd::launch("max_pool2d_backward", max_pool_backward_kernel<T, A>, dim3(blocks), dim3(kPoolThreads), 0, stream,
                 planes, gy.size(2), gy.size(3), in_plane, gy.data<T>(), nchw(gy), indices.data<int64_t>(),
                 nchw(indices), static_cast<A*>(acc.data_ptr()), bd::device_error_slot(), err_code);
    }
    if constexpr (!direct)
      bd::launch_elementwise<T, float>("max_pool2d_backward_round", gx, {&acc}, PoolIdentity<float>{});
  });
}

void avg_pool2d(const PoolShape& g, bool count_include_pad, const Tensor& x, const Tensor& y) {
  OpScope scope("avg_pool2d", &x);
  const int64_t total = y.numel();
  if (total == 0) return;
  brisk::cuda::DeviceGuard guard(x.device().index);
  const cudaStream_t stream = bd::current_native_stream(x.device().index);
  visit_float(x.dtype(), x.device(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    bd::launch("avg_pool2d", avg_pool_kernel<T>, grid_for(total), dim3(kPoolThreads), 0, stream, g, count_include_pad,
               total, x.data<T>(), nchw(x), y.data<T>());
  });
}

void avg_pool2d_backward(const PoolShape& g, bool count_include_pad, const Tensor& gy, const Tensor& gx) {
  OpScope scope("avg_pool2d_backward", &gy);
  const int64_t total = gx.numel();
  if (total == 0) return;
  brisk::cuda::DeviceGuard guard(gx.device().index);
  const cudaStream_t stream = bd::current_native_stream(gx.device().index);
  visit_float(gx.dtype(), gx.device(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    bd::launch("avg_pool2d_backward", avg_pool_backward_kernel<T>, grid_for(total), dim3(kPoolThreads), 0, stream, g,
               count_include_pad, total, gy.data<T>(), nchw(gy), gx.data<T>());
  });
}

void adaptive_avg_pool2d(const Tensor& x, const Tensor& y) {
  OpScope scope("adaptive_avg_pool2d", &x);
  const int64_t total = y.numel();
  if (total == 0) return;
  brisk::cuda::DeviceGuard guard(x.device().index);
  const cudaStream_t stream = bd::current_native_stream(x.device().index);
  visit_float(x.dtype(), x.device(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    bd::launch("adaptive_avg_pool2d", adaptive_avg_kernel<T>, grid_for(total), dim3(kPoolThreads), 0, stream,
               adaptive_shape(x, y), total, x.data<T>(), nchw(x), y.data<T>());
  });
}

void adaptive_avg_pool2d_backward(const Tensor& gy, const Tensor& gx) {
  OpScope scope("adaptive_avg_pool2d_backward", &gy);
  const int64_t total = gx.numel();
  if (total == 0) return;
  brisk::cuda::DeviceGuard guard(gx.device().index);
  const cudaStream_t stream = bd::current_native_stream(gx.device().index);
  visit_float(gx.dtype(), gx.device(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    bd::launch("adaptive_avg_pool2d_backward", adaptive_avg_backward_kernel<T>, grid_for(total), dim3(kPoolThreads), 0,
               stream, adaptive_shape(gx, gy), total, gy.data<T>(), nchw(gy), gx.data<T>());
  });
}

}  // namespace brisk::kernels::cuda
