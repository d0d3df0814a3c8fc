// BRISK_CUDA_CHECK: every CUDA runtime call goes through it, so a failure becomes a
// brisk::Error carrying the call, the runtime's own error string and the file and line.
#pragma once
#include <cuda_runtime.h>

#include "brisk/core/allocator.h"
#include "brisk/core/error.h"

#define BRISK_CUDA_CHECK(call)                                                                       \
  do {                                                                                               \
    cudaError_t brisk_cuda_err_ = (call);                                                            \
    if (brisk_cuda_err_ != cudaSuccess) [[unlikely]] {                                               \
      (void)cudaGetLastError(); /* reset the last error so later calls are not blamed */          \
      ::brisk::throw_error(::brisk::detail::str_cat("CUDA error in ", #call, ": ",                   \
                                                    cudaGetErrorString(brisk_cuda_err_), " (",       \
                                                    cudaGetErrorName(brisk_cuda_err_), ")"),         \
                           __FILE__, __LINE__);                                                      \
    }                                                                                                \
  } while (0)

namespace brisk::cuda::detail {

// Sets the current device for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    BRISK_CUDA_CHECK(cudaGetDevice(&prev_));
    if (device != prev_) BRISK_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(prev_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
};

// The caching allocator (allocator.cpp).
Allocator* caching_allocator_instance();
// Registers the CUDA allocator and device copy with core (idempotent).
void register_with_core();

}  // namespace brisk::cuda::detail
