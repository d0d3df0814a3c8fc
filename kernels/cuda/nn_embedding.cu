// CUDA embedding lookup (row copies, shared with index_select) and its backward: by default a
// stable sort of the indices, after which the first thread of each run of equal indices sums the
// run's gradient rows in index order, exactly as the CPU does; with kernels::deterministic() off,
// atomicAdd per element (into an f32 buffer for 16-bit types).
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/settings.h"
#include "cuda/copy.h"
#include "cuda/index_common.cuh"
#include "cuda/nn.h"

namespace brisk::kernels::cuda {

namespace {

namespace rt = brisk::cuda::detail;
using common::in_range;
using common::report_bad_value;
using common::Slot;
using device::IndexDiv;

int32_t embedding_error() {
  static const int32_t id = rt::register_device_error("embedding: index out of range [0, limit)");
  return id;
}
int32_t embedding_backward_error() {
  static const int32_t id = rt::register_device_error("embedding backward: index out of range [0, limit)");
  return id;
}

// grad: (n, D); keys/pos: the indices sorted stably (keys >= V are bad values, sorted last);
// out: (V, D), zeroed before, `=` on rows that some index hits. Item (k, c): the thread at the
// first key of a run sums the run's grad rows (index order) in acc_t and writes once.
template <class T>
__global__ void embedding_backward_runs_kernel(int64_t total, IndexDiv d_div, int64_t n, int64_t V, int64_t D,
                                               int64_t padding_idx, const uint32_t* __restrict__ keys,
                                               const int32_t* __restrict__ pos, const T* __restrict__ grad,
                                               T* __restrict__ out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t k, c;
    d_div.divmod(i, k, c);
    const int64_t v = keys[k];
    if (v == padding_idx) continue;
    acc_t<T> acc = 0;
    if (device::for_each_in_run(keys, pos, n, k, V, [&](int64_t j) { acc += device::to_acc(grad[j * D + c]); }))
      out[v * D + c] = device::from_acc<T>(acc);
  }
}

// grad: (n, D); idx: (n); out: (V, D) of W (T, or f32 for 16-bit T), zeroed before, `+=` with
// atomicAdd. Item (j, c).
template <class T, class W, class I>
__global__ void embedding_backward_atomic_kernel(int64_t total, IndexDiv d_div, int64_t V, int64_t D,
                                                 int64_t padding_idx, const I* __restrict__ idx,
                                                 const T* __restrict__ grad, W* __restrict__ out, Slot* slot,
                                                 int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t j, c;
    d_div.divmod(i, j, c);
    const I v = idx[j];
    if (!in_range(v, V)) {
      report_bad_value(slot, code, static_cast<int64_t>(v), V);
      continue;
    }
    if (static_cast<int64_t>(v) == padding_idx) continue;
    common::atomic_add(out + static_cast<int64_t>(v) * D + c, static_cast<W>(device::to_acc(grad[i])));
  }
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) {
  OpScope scope("embedding", &idx, &weight);
  common::index_rows(weight, idx, 1, weight.size(0), weight.size(1), out, embedding_error());
}

void embedding_backward(const Tensor& grad, const Tensor& idx, int64_t padding_idx, const Tensor& out) {
  OpScope scope("embedding backward", &grad, &idx);
  const int32_t code = embedding_backward_error();
  const int64_t n = idx.numel(), V = out.size(0), D = out.size(1), total = n * D;
  const int device = grad.device().index;
  brisk::cuda::DeviceGuard guard(device);
  cudaStream_t stream = rt::current_native_stream(device);
  visit_float(grad.dtype(), grad.device(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = static_cast<const T*>(grad.data_ptr());
    if (!deterministic()) {
      // 16-bit rows are summed in f32 and rounded once, as the CPU rounds its f32 sums.
      constexpr bool kWide = !std::is_same_v<acc_t<T>, T>;
      using W = acc_t<T>;
      Tensor acc = kWide ? empty(out.sizes(), DType::F32, out.device()) : out;
      rt::memset_async(acc.data_ptr(), 0, acc.nbytes(), stream);
      if (total > 0) {
        visit_index(idx.dtype(), idx.device(), "embedding backward", [&](auto itag) {
          using I = decltype(itag);
          rt::launch("embedding_backward_atomic", embedding_backward_atomic_kernel<T, W, I>,
                     dim3(common::grid_for(total, device)), dim3(common::kThreads), 0, stream, total,
                     IndexDiv(D, total), V, D, padding_idx, static_cast<const I*>(idx.data_ptr()), gp,
                     static_cast<W*>(acc.data_ptr()), rt::device_error_slot(), code);
        });
      }
      if (kWide) copy(out, acc);
      return;
    }
    rt::memset_async(out.data_ptr(), 0, out.nbytes(), stream);
    if (total == 0) return;
    const common::SortedIndex sorted = common::sort_index(idx, V, code);
    rt::launch("embedding_backward_runs", embedding_backward_runs_kernel<T>, dim3(common::grid_for(total, device)),
               dim3(common::kThreads), 0, stream, total, IndexDiv(D, total), n, V, D, padding_idx,
               static_cast<const uint32_t*>(sorted.keys.data_ptr()),
               static_cast<const int32_t*>(sorted.positions.data_ptr()), gp, static_cast<T*>(out.data_ptr()));
  });
}

}  // namespace brisk::kernels::cuda
