// Copies between the host and GPUs, pinned host tensors, and the start-up registration that
// plugs the caching allocator, the pinned allocator and the copy into core when the library is
// loaded. Copies run on the current stream of the GPU involved: a device-to-device copy is only
// enqueued (later work on that stream sees the bytes); a copy to the host waits unless asked
// not to; a copy from pinned host memory can be only enqueued (non_blocking), the pinned block
// then staying reserved until the copy has run.
#include <cstring>
#include <mutex>

#include "brisk/core/tensor.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/elementwise.h"
#include "cuda/runtime.h"

namespace brisk::cuda {

namespace {

void check_device(Device d, const char* what) {
  BRISK_CHECK(d.index >= 0 && d.index < device_count(), "copy_bytes: ", what, " device ", d.str(), " does not exist (",
              device_count(), " CUDA devices visible)");
}

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes, bool non_blocking) {
  if (nbytes == 0) return;
  if (dst_dev.is_cuda()) check_device(dst_dev, "destination");
  if (src_dev.is_cuda()) check_device(src_dev, "source");
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (dst_dev.is_cuda() && src_dev.is_cuda()) {
    if (dst_dev.index != src_dev.index) {
      // Order the copy after the source's pending work, then run it on the destination's stream.
      Event ready;
      ready.record(current_stream(src_dev.index));
      Stream s = current_stream(dst_dev.index);
      ready.wait(s);
      DeviceGuard guard(dst_dev.index);
      if (detail::recording()) {
        detail::memcpy_async(dst, src, nbytes, detail::native(s), false);
      } else {
        BRISK_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev.index, src, src_dev.index, nbytes, detail::native(s)));
      }
      if (!non_blocking) s.synchronize();
      return;
    }
    DeviceGuard guard(dst_dev.index);
    detail::memcpy_async(dst, src, nbytes, detail::current_native_stream(dst_dev.index), false);
    return;
  }
  const int gpu = dst_dev.is_cuda() ? dst_dev.index : src_dev.index;
  const void* host = dst_dev.is_cuda() ? src : dst;
  DeviceGuard guard(gpu);
  cudaStream_t s = detail::current_native_stream(gpu);
  const bool pinned = detail::is_pinned_pointer(host);
  // From pageable memory the driver stages the bytes before returning, so only pinned memory
  // can be left in flight.
  const bool wait = !(non_blocking && pinned);
  detail::memcpy_async(dst, src, nbytes, s, wait);
  if (!wait) detail::pinned_record_use(host, s);
}

}  // namespace

void detail::register_with_core() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_allocator(DeviceKind::CUDA, caching_allocator_instance());
    register_pinned_allocator(pinned_allocator_instance());
    register_device_copy(&device_copy);
  });
}

namespace {
// Runs when libbrisk_kernels is loaded. It touches no CUDA API, so loading the library on a
// machine without a driver costs nothing; the first CUDA tensor is what fails there, clearly.
[[maybe_unused]] const bool registered = (detail::register_with_core(), true);
}  // namespace

Tensor empty_pinned(const Shape& sizes, DType dtype) {
  if (!is_available()) return empty(sizes, dtype, kCPU);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(static_cast<size_t>(shape_numel(sizes)) * dtype_size(dtype), kCPU,
                                                current_memory_category(), detail::pinned_allocator_instance());
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor pin_memory(const Tensor& t) {
  BRISK_CHECK(t.defined() && t.device().is_cpu(), "pin_memory: expected a CPU tensor, got ",
              t.defined() ? t.device().str() : std::string("an undefined tensor"));
  if (!is_available() || t.is_pinned()) return t;
  Tensor src = kernels::contiguous(t);
  Tensor out = empty_pinned(t.sizes(), t.dtype());
  std::memcpy(out.data_ptr(), src.data_ptr(), src.nbytes());
  return out;
}

}  // namespace brisk::cuda
