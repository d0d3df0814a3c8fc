// cuBLAS, cuBLASLt and cuDNN plumbing shared by matmul and conv (internal header): status
// checks that throw brisk::Error with the library's own status name and message, the call and
// the op being run; one handle per (device, thread), created lazily; and workspaces from the
// caching allocator. Handles need the driver: never ask for one while recording (call
// recording_library_call() first and skip the library call when it returns true).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>

#include "brisk/core/tensor.h"
#include "cuda/runtime.h"

namespace brisk::cuda::detail {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);

}  // namespace brisk::cuda::detail

// cuBLAS and cuBLASLt calls (both return cublasStatus_t).
#define BRISK_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                            \
    cublasStatus_t brisk_cublas_status_ = (call);                                                 \
    if (brisk_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                               \
      ::brisk::cuda::detail::throw_cublas_error(brisk_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define BRISK_CUDNN_CHECK(call)                                                                 \
  do {                                                                                          \
    cudnnStatus_t brisk_cudnn_status_ = (call);                                                 \
    if (brisk_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                               \
      ::brisk::cuda::detail::throw_cudnn_error(brisk_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace brisk::cuda::detail {

// The calling thread's handles for `device` (created on first use; a thread's handles go back to
// a per-device pool when the thread exits and are reused by later threads, never destroyed, as
// the driver may already be gone at process exit). The cuBLAS and cuDNN handles come bound to
// `stream` (cublasSetStream / cudnnSetStream); cuBLASLt takes its stream per call. The caller
// must have made `device` current. Not allowed while recording.
cublasLtHandle_t cublaslt_handle(int device);
cublasHandle_t cublas_handle(int device, cudaStream_t stream);
cudnnHandle_t cudnn_handle(int device, cudaStream_t stream);

// Logs a library's host-side preparation call (a cuDNN descriptor made or set, a math mode, an
// algorithm or workspace query) while recording, as a recording::Kind::Library entry like the
// calls recording skips. The caller still makes the call when it needs no GPU (descriptors).
void recording_library_setup(const char* name);

// A scratch buffer of `bytes` on `device` from the caching allocator (current stream), for a
// library call enqueued on that stream: work on one stream runs in order, so the block can go
// back to the cache as soon as the call is enqueued. Undefined (and no error) when bytes is 0 or
// the allocation fails, so callers can fall back to algorithms that need less.
Tensor try_workspace(int device, size_t bytes);

// The cuBLAS/cuBLASLt workspace size PyTorch uses: 32 MiB on Hopper and newer, 4 MiB before.
size_t blas_workspace_bytes(int device);

// The largest power of two (at most 256) that divides the address: what cuBLASLt's alignment
// preferences need to exclude kernels that would read misaligned vectors.
inline uint32_t pointer_alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align >>= 1;
  return align;
}

}  // namespace brisk::cuda::detail
