// CUDA device queries, the device copy core routes through, and the start-up registration
// that plugs the caching allocator and the copy into core when the library is loaded.
#include <cstring>
#include <mutex>

#include "brisk/core/tensor.h"
#include "brisk/kernels/cuda.h"
#include "cuda/check.h"

namespace brisk::cuda {

int device_count() {
  // Asked once: without a driver or GPU the runtime reports an error, which means "none".
  static const int count = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

void synchronize(int device) {
  if (!is_available()) return;
  if (device < 0) {
    BRISK_CUDA_CHECK(cudaDeviceSynchronize());
    return;
  }
  detail::DeviceGuard guard(device);
  BRISK_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {

void check_device(Device d, const char* what) {
  BRISK_CHECK(d.index >= 0 && d.index < device_count(), "copy_bytes: ", what, " device ", d.str(),
              " does not exist (", device_count(), " CUDA devices visible)");
}

// Host <-> device and device <-> device copies. Synchronous: the bytes are in place on return
// (host memory here is pageable, for which cudaMemcpy is synchronous anyway).
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_dev.is_cuda()) check_device(dst_dev, "destination");
  if (src_dev.is_cuda()) check_device(src_dev, "source");
  if (dst_dev.is_cuda() && src_dev.is_cuda()) {
    if (dst_dev.index == src_dev.index) {
      detail::DeviceGuard guard(dst_dev.index);
      BRISK_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToDevice));
    } else {
      BRISK_CUDA_CHECK(cudaMemcpyPeer(dst, dst_dev.index, src, src_dev.index, nbytes));
    }
  } else if (dst_dev.is_cuda()) {
    detail::DeviceGuard guard(dst_dev.index);
    BRISK_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
  } else if (src_dev.is_cuda()) {
    detail::DeviceGuard guard(src_dev.index);
    BRISK_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
  } else {
    std::memcpy(dst, src, nbytes);
  }
}

}  // namespace

void detail::register_with_core() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_allocator(DeviceKind::CUDA, caching_allocator_instance());
    register_device_copy(&device_copy);
  });
}

namespace {
// Runs when libbrisk_kernels is loaded. It touches no CUDA API, so loading the library on a
// machine without a driver costs nothing; the first CUDA tensor is what fails there, clearly.
[[maybe_unused]] const bool registered = (detail::register_with_core(), true);
}  // namespace

}  // namespace brisk::cuda
