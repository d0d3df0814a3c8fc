// Factory fills on the GPU: element i (row-major) gets f(i) from the per-element functions the
// CPU factories use (device/factory.h, device/random.h), so arange, linspace and the random
// draws give the CPU's values bit for bit, made on the device with no host buffer. Contiguous
// aligned tensors are written a 128-bit vector at a time; other layouts through the strided
// indexer. Both loops are grid-stride, so any grid covers every element once.
#include <type_traits>

#include "brisk/kernels/device/factory.h"
#include "brisk/kernels/device/random.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/factory.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace rt = ::brisk::cuda::detail;

// out: (n,) contiguous, 16-byte aligned. Whole vectors of W elements, then the scalar tail.
template <int W, class T, class F>
__global__ void fill_indexed_vector_kernel(int64_t n, T* out, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const device::VecSplit split = device::vec_split(n, W);
  for (int64_t v = tid; v < split.vectors; v += step) {
    device::AlignedVector<T, W> r;
#pragma unroll
    for (int l = 0; l < W; ++l) r.v[l] = device::store_double<T>(f(v * W + l));
    device::store_vector<T, W>(out, v, r);
  }
  for (int64_t i = split.tail_begin + tid; i < n; i += step) out[i] = device::store_double<T>(f(i));
}

// out: n elements at the offsets the indexer gives for row-major positions 0..n-1.
template <class T, class F>
__global__ void fill_indexed_strided_kernel(int64_t n, device::StridedIndexer<1> ix, T* out, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[1];
    ix.offsets(i, off);
    out[off[0]] = device::store_double<T>(f(i));
  }
}

// The random float fills (uniform_, normal_) only take float dtypes (checked by the factories);
// the others take every dtype.
template <class F>
inline constexpr bool kFloatOnly = std::is_same_v<F, device::UniformDraw> || std::is_same_v<F, device::NormalDraw>;

template <class F>
void launch_fill(const Tensor& t, const char* op, const F& f) {
  OpScope scope(op, &t);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = t.numel();
    if (n == 0) return;
    ::brisk::cuda::DeviceGuard guard(t.device().index);
    cudaStream_t stream = rt::current_native_stream(t.device().index);
    T* out = static_cast<T*>(t.data_ptr());
    constexpr int W = device::vec_width<T>;
    if (t.is_contiguous() && device::is_aligned(out, sizeof(T) * W)) {
      const int64_t items = device::vec_split(n, W).vectors + W;  // vectors, plus the tail
      rt::launch(op, fill_indexed_vector_kernel<W, T, F>, dim3(rt::elementwise_blocks(items)),
                 dim3(rt::kElementwiseThreads), 0, stream, n, out, f);
    } else {
      const auto ix = device::make_indexer<1>(t.sizes(), {t.strides()});
      rt::launch(op, fill_indexed_strided_kernel<T, F>, dim3(rt::elementwise_blocks(n)), dim3(rt::kElementwiseThreads),
                 0, stream, n, ix, out, f);
    }
  };
  if constexpr (kFloatOnly<F>)
    visit_float(t.dtype(), t.device(), op, run);
  else
    visit_all(t.dtype(), t.device(), op, run);
}

}  // namespace

void fill_indexed(const Tensor& t, const char* op, const device::ArangeValues& f) {
  launch_fill(t, op, f);
}
void fill_indexed(const Tensor& t, const char* op, const device::LinspaceValues& f) {
  launch_fill(t, op, f);
}
void fill_indexed(const Tensor& t, const char* op, const device::UniformDraw& f) {
  launch_fill(t, op, f);
}
void fill_indexed(const Tensor& t, const char* op, const device::NormalDraw& f) {
  launch_fill(t, op, f);
}
void fill_indexed(const Tensor& t, const char* op, const device::RandintDraw& f) {
  launch_fill(t, op, f);
}

}  // namespace brisk::kernels::cuda
