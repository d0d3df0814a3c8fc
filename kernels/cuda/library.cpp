// Status checks, per-(device, thread) handles and workspaces for cuBLAS, cuBLASLt and cuDNN.
#include "cuda/library.h"

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "brisk/core/allocator.h"

namespace brisk::cuda::detail {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  std::string ctx = op_context();
  throw_error(brisk::detail::str_cat("cuBLAS error in ", call, ": ", cublasGetStatusString(status), " (",
                                     cublasGetStatusName(status), ")", ctx.empty() ? "" : " ", ctx),
              file, line);
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  // cuDNN 9 keeps a more specific message for the last failure of this thread.
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string ctx = op_context();
  throw_error(brisk::detail::str_cat("cuDNN error in ", call, ": ", cudnnGetErrorString(status), detail[0] ? " (" : "",
                                     detail, detail[0] ? ")" : "", ctx.empty() ? "" : " ", ctx),
              file, line);
}

void recording_library_setup(const char* name) {
  if (!recording()) return;
  recording::Entry e;
  e.kind = recording::Kind::Library;
  e.name = name;
  e.device = brisk::cuda::current_device();
  recording::record(std::move(e));
}

namespace {

// Handles of one kind, per device: those in use by live threads are in their thread's slots;
// those of exited threads wait in `free` for the next thread.
template <class H>
struct HandlePool {
  std::mutex mu;
  std::unordered_map<int, std::vector<H>> free;
};

template <class H>
HandlePool<H>& pool() {
  static auto* p = new HandlePool<H>;  // outlives every thread
  return *p;
}

// The calling thread's handles of kind H, handed back to the pool when the thread ends.
template <class H>
struct ThreadHandles {
  std::unordered_map<int, H> by_device;
  ~ThreadHandles() {
    HandlePool<H>& p = pool<H>();
    std::lock_guard lk(p.mu);
    for (auto& [device, h] : by_device) p.free[device].push_back(h);
  }
};

template <class H, class Create>
H thread_handle(int device, Create create) {
  BRISK_CHECK(!recording(), "internal error: a cuBLAS/cuDNN handle was asked for while recording ", op_context());
  thread_local ThreadHandles<H> mine;
  auto it = mine.by_device.find(device);
  if (it != mine.by_device.end()) return it->second;
  H h{};
  {
    HandlePool<H>& p = pool<H>();
    std::lock_guard lk(p.mu);
    auto& v = p.free[device];
    if (!v.empty()) {
      h = v.back();
      v.pop_back();
    }
  }
  if (!h) h = create();
  mine.by_device.emplace(device, h);
  return h;
}

}  // namespace

cublasLtHandle_t cublaslt_handle(int device) {
  return thread_handle<cublasLtHandle_t>(device, [] {
    cublasLtHandle_t h = nullptr;
    BRISK_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  });
}

cublasHandle_t cublas_handle(int device, cudaStream_t stream) {
  cublasHandle_t h = thread_handle<cublasHandle_t>(device, [] {
    cublasHandle_t h = nullptr;
    BRISK_CUBLAS_CHECK(cublasCreate(&h));
    // 16-bit GEMMs accumulate in fp32 all the way: no split-K reductions in the output type.
    BRISK_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    return h;
  });
  // Also resets the handle's workspace to cuBLAS's default pool (callers set theirs after).
  BRISK_CUBLAS_CHECK(cublasSetStream(h, stream));
  return h;
}

cudnnHandle_t cudnn_handle(int device, cudaStream_t stream) {
  cudnnHandle_t h = thread_handle<cudnnHandle_t>(device, [] {
    cudnnHandle_t h = nullptr;
    BRISK_CUDNN_CHECK(cudnnCreate(&h));
    return h;
  });
  BRISK_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

Tensor try_workspace(int device, size_t bytes) {
  // cuDNN sometimes reports absurd sizes for algorithms it cannot run; treat those as "no".
  if (bytes == 0 || bytes >= (size_t{1} << 40)) return Tensor();
  MemoryCategoryGuard category(MemoryCategory::Other);
  try {
    return empty({static_cast<int64_t>(bytes)}, DType::U8, cuda_device(device));
  } catch (const Error&) {
    return Tensor();  // out of memory: the caller picks an algorithm that needs less
  }
}

size_t blas_workspace_bytes(int device) {
  if (recording()) return size_t{32} << 20;
  static std::mutex mu;
  static std::unordered_map<int, size_t> cache;
  std::lock_guard lk(mu);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  int major = 9;
  BRISK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return cache[device] = major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

}  // namespace brisk::cuda::detail
