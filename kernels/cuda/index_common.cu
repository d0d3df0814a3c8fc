// Row copies picked by an index and the stable index sort shared by the CUDA index and nn
// kernels (see cuda/index_common.cuh).
#include <cub/device/device_radix_sort.cuh>

#include "brisk/kernels/device/vec.h"
#include "brisk/kernels/dispatch.h"
#include "cuda/index_common.cuh"

namespace brisk::kernels::cuda::common {

namespace {

// x: contiguous (pre, mid, units) of U; idx: contiguous (n); out: contiguous (pre, n, units).
// Item i of the grid-stride loop is out's unit i: (p, j, u) = i split by (n, units).
template <class U, class I>
__global__ void index_rows_kernel(int64_t total, IndexDiv unit_div, IndexDiv n_div, int64_t mid, int64_t units,
                                  const U* __restrict__ x, const I* __restrict__ idx, U* __restrict__ out, Slot* slot,
                                  int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t row, u, p, j;
    unit_div.divmod(i, row, u);
    n_div.divmod(row, p, j);
    const I v = idx[j];
    if (!in_range(v, mid)) {
      report_bad_value(slot, code, static_cast<int64_t>(v), mid);
      out[i] = U{};
      continue;
    }
    out[i] = x[(p * mid + static_cast<int64_t>(v)) * units + u];
  }
}

// idx: (n); keys[i] = idx[i] (or `limit` when out of range), positions[i] = i.
template <class I>
__global__ void sort_prepare_kernel(int64_t n, const I* __restrict__ idx, int64_t limit, uint32_t* __restrict__ keys,
                                    int32_t* __restrict__ positions, Slot* slot, int32_t code) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const I v = idx[i];
    if (in_range(v, limit)) {
      keys[i] = static_cast<uint32_t>(v);
    } else {
      report_bad_value(slot, code, static_cast<int64_t>(v), limit);
      keys[i] = static_cast<uint32_t>(limit);
    }
    positions[i] = static_cast<int32_t>(i);
  }
}

template <class U>
void launch_index_rows(const Tensor& x, const Tensor& idx, int64_t pre, int64_t mid, int64_t units, const Tensor& out,
                       int32_t code) {
  const int64_t n = idx.numel(), total = pre * n * units;
  const int device = x.device().index;
  cudaStream_t stream = rt::current_native_stream(device);
  visit_index(idx.dtype(), idx.device(), "index_select", [&](auto itag) {
    using I = decltype(itag);
    rt::launch("index_rows", index_rows_kernel<U, I>, dim3(grid_for(total, device)), dim3(kThreads), 0, stream, total,
               IndexDiv(units, total), IndexDiv(n, total / units), mid, units, static_cast<const U*>(x.data_ptr()),
               static_cast<const I*>(idx.data_ptr()), static_cast<U*>(out.data_ptr()), rt::device_error_slot(), code);
  });
}

}  // namespace

void index_rows(const Tensor& x, const Tensor& idx, int64_t pre, int64_t mid, int64_t post, const Tensor& out,
                int32_t error_code) {
  if (pre * idx.numel() * post == 0) return;
  brisk::cuda::DeviceGuard guard(x.device().index);
  // Rows are moved as raw units: 16-byte vectors when every row starts 16-byte aligned, else
  // elements of the dtype's size (no dtype dispatch needed for a copy).
  const size_t es = x.element_size(), row_bytes = static_cast<size_t>(post) * es;
  if (row_bytes % 16 == 0 && device::is_aligned(x.data_ptr(), 16) && device::is_aligned(out.data_ptr(), 16)) {
    launch_index_rows<uint4>(x, idx, pre, mid, static_cast<int64_t>(row_bytes / 16), out, error_code);
    return;
  }
  switch (es) {
    case 1:
      launch_index_rows<uint8_t>(x, idx, pre, mid, post, out, error_code);
      break;
    case 2:
      launch_index_rows<uint16_t>(x, idx, pre, mid, post, out, error_code);
      break;
    case 4:
      launch_index_rows<uint32_t>(x, idx, pre, mid, post, out, error_code);
      break;
    case 8:
      launch_index_rows<uint64_t>(x, idx, pre, mid, post, out, error_code);
      break;
    default:
      BRISK_THROW("index_rows: unsupported element size ", es);
  }
}

SortedIndex sort_index(const Tensor& idx, int64_t limit, int32_t error_code) {
  const int64_t n = idx.numel();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max() - 1;
  BRISK_CHECK(n <= kMax && limit <= kMax, "sort_index: ", n, " indices into ", limit,
              " rows exceed the CUDA kernels' 32-bit index sort");
  const Device dev = idx.device();
  brisk::cuda::DeviceGuard guard(dev.index);
  cudaStream_t stream = rt::current_native_stream(dev.index);
  Tensor keys_in = empty({n}, DType::I32, dev), pos_in = empty({n}, DType::I32, dev);
  SortedIndex out{empty({n}, DType::I32, dev), empty({n}, DType::I32, dev)};
  if (n == 0) return out;
  auto* kin = static_cast<uint32_t*>(keys_in.data_ptr());
  auto* kout = static_cast<uint32_t*>(out.keys.data_ptr());
  auto* pin = static_cast<int32_t*>(pos_in.data_ptr());
  auto* pout = static_cast<int32_t*>(out.positions.data_ptr());
  visit_index(idx.dtype(), dev, "sort_index", [&](auto itag) {
    using I = decltype(itag);
    rt::launch("sort_index_prepare", sort_prepare_kernel<I>, dim3(grid_for(n, dev.index)), dim3(kThreads), 0, stream, n,
               static_cast<const I*>(idx.data_ptr()), limit, kin, pin, rt::device_error_slot(), error_code);
  });
  // Only the bits that can be set: keys are at most `limit`.
  int end_bit = 1;
  while ((int64_t{1} << end_bit) <= limit) ++end_bit;
  if (rt::recording_library_call("cub::DeviceRadixSort::SortPairs", stream)) return out;
  size_t temp_bytes = 0;
  BRISK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, kin, kout, pin, pout, static_cast<int>(n), 0,
                                                   end_bit, stream));
  Tensor temp = empty({static_cast<int64_t>(temp_bytes > 0 ? temp_bytes : 1)}, DType::U8, dev);
  BRISK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data_ptr(), temp_bytes, kin, kout, pin, pout,
                                                   static_cast<int>(n), 0, end_bit, stream));
  return out;
}

}  // namespace brisk::kernels::cuda::common
