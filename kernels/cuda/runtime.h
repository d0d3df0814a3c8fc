// The thin layer every CUDA call in kernels/ goes through (internal header): error checking
// that names the library, the call and the op being run; the current stream; and recording
// mode (brisk/kernels/cuda_recording.h), in which these wrappers log instead of calling CUDA.
// Kernel launches go through launch() in cuda/launch.cuh; library calls (cuBLASLt, cuDNN) are
// guarded by `if (recording_library_call("name")) return;` so a test can see them too.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "brisk/core/tensor.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/cuda_recording.h"
#include "brisk/util/error.h"

namespace brisk::cuda::detail {

// "in matmul on [4, 8] f32 cuda:0, [8, 3] f32 cuda:0" for the op the calling thread is inside
// (see kernels::OpScope), or "" outside any op.
std::string op_context();

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

}  // namespace brisk::cuda::detail

// Every CUDA runtime call goes through this: a failure becomes a brisk::Error naming the call,
// the runtime's message and error name, and the op (with its shapes) that was running.
#define BRISK_CUDA_CHECK(call)                                                             \
  do {                                                                                     \
    cudaError_t brisk_cuda_err_ = (call);                                                  \
    if (brisk_cuda_err_ != cudaSuccess) [[unlikely]]                                       \
      ::brisk::cuda::detail::throw_cuda_error(brisk_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

namespace brisk::cuda::detail {

inline bool recording() {
  return recording::active();
}

// Sets the device for a scope without ever throwing (for destructor paths); does nothing while
// recording.
class DeviceGuardNoThrow {
 public:
  explicit DeviceGuardNoThrow(int device) {
    if (recording() || cudaGetDevice(&prev_) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    if (device != prev_ && cudaSetDevice(device) == cudaSuccess) changed_ = true;
    (void)cudaGetLastError();
  }
  ~DeviceGuardNoThrow() {
    if (changed_) (void)cudaSetDevice(prev_);
  }
  DeviceGuardNoThrow(const DeviceGuardNoThrow&) = delete;
  DeviceGuardNoThrow& operator=(const DeviceGuardNoThrow&) = delete;

 private:
  int prev_ = 0;
  bool changed_ = false;
};

// The cudaStream_t of a Stream, and of the calling thread's current stream on `device`.
inline cudaStream_t native(const Stream& s) {
  return static_cast<cudaStream_t>(s.handle());
}
inline cudaStream_t current_native_stream(int device = -1) {
  return native(current_stream(device));
}

// Streaming multiprocessors of `device` (cached; 132 while recording).
int multiprocessor_count(int device);
// The GPU's compute capability major number (9 for Hopper).
int compute_capability_major(int device);
// The most dynamic shared memory one block may ask for (cudaDevAttrMaxSharedMemoryPerBlockOptin).
int shared_memory_optin(int device);

// Logs a library call while recording and returns true (the caller then skips the call).
bool recording_library_call(const char* name, cudaStream_t stream = nullptr);
// The same, with what the call was asked to do beyond its name (Entry::detail).
bool recording_library_call(const char* name, cudaStream_t stream, const char* detail);

// Copies and memsets on `stream`; `sync` waits for the stream afterwards (what a blocking copy
// needs). Directions are inferred by the driver (unified addressing).
void memcpy_async(void* dst, const void* src, size_t nbytes, cudaStream_t stream, bool sync);
void memset_async(void* dst, int value, size_t nbytes, cudaStream_t stream);

// True for device (or managed) memory, false for host memory, pinned or not.
bool is_device_pointer(const void* p);

// Raw device memory outside the caching allocator (for the allocator itself and workspaces
// that live as long as the process).
void* raw_malloc(size_t nbytes, int device);
void raw_free(void* p, int device);

// The device pointer of a process-wide word in mapped pinned host memory that kernels set to a
// nonzero op code when they find bad input they cannot report otherwise (an out-of-range
// index). Checked, and turned into a brisk::Error naming the op, whenever the host waits for
// the GPU (synchronize, blocking copies to the host).
struct DeviceErrorSlot {
  int32_t code;   // 0: no error; else an id from register_device_error()
  int64_t value;  // the offending value (one of them, when several threads found one)
  int64_t limit;  // the bound it broke
};
DeviceErrorSlot* device_error_slot();
// Returns an id for a message prefix such as "embedding: index out of range".
int32_t register_device_error(const char* what);
// Throws (and clears the slot) when a kernel reported an error.
void check_device_errors();

// Launch checks shared by launch() in cuda/launch.cuh (which nvcc alone compiles).
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr int kWarpSize = 32;
// Above this, a kernel must opt in to more dynamic shared memory (cudaFuncSetAttribute).
inline constexpr size_t kDefaultSharedLimit = 48 * 1024;
// Validates grid/block against the limits every current GPU shares (a bad shape is a
// brisk::Error naming the kernel and the op) and logs the launch while recording. Returns false
// when the kernel must not be started (recording).
bool prepare_launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream);
// Throws if the launch just made failed.
void check_launch(const char* name);

// The caching allocator (allocator.cpp) and the pinned host allocator.
Allocator* caching_allocator_instance();
Allocator* pinned_allocator_instance();
// CUDA graph capture (graph.cpp): while a capture runs on `stream`, the allocations made on it come
// from the graph's private pool `graph_pool` (an id that is no real stream), and blocks freed
// anywhere on the device join that pool. A capture also takes free blocks of its stream and of the
// default stream. release_pool hands the pool's blocks to `reuse_on` once the graph is destroyed
// and the device idle.
void allocator_begin_capture(int device, cudaStream_t stream, cudaStream_t graph_pool);
void allocator_end_capture(int device);
void allocator_release_pool(int device, cudaStream_t graph_pool, cudaStream_t reuse_on);
// Throws a brisk::Error saying that `what` waits for the GPU (or reads host memory), which a CUDA
// graph capture cannot record, when the calling thread is capturing.
void throw_if_capturing(const char* what);
// Blocks allocated on `alloc_stream` but used on `use_stream` (record_stream).
void allocator_record_stream(void* ptr, cudaStream_t use_stream);
// True when p points into a block of the pinned host allocator.
bool is_pinned_pointer(const void* p);
// Pinned host blocks used by an asynchronous copy on `stream` are not reused before it ends.
void pinned_record_use(const void* ptr, cudaStream_t stream);
// Registers the CUDA allocator, pinned allocator and device copy with core (idempotent).
void register_with_core();

}  // namespace brisk::cuda::detail
