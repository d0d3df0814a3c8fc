// CUDA graphs (brisk/kernels/cuda.h): capture on a side stream with the caching allocator in
// private-pool mode, instantiate once, replay with one cudaGraphLaunch. While recording
// (brisk/kernels/cuda_recording.h) the same host logic runs: fn's launches are logged between
// "cudaStreamBeginCapture" and "cudaStreamEndCapture" entries, and a replay logs "cudaGraphLaunch",
// so tests can check the allocator's pool and the capture errors without a GPU.
#include <atomic>
#include <cstdint>

#include "cuda/runtime.h"

namespace brisk::cuda {

namespace {

thread_local bool tl_capturing = false;

// Pool ids: odd values, never a real stream handle (those are pointers to aligned objects).
cudaStream_t new_pool_id() {
  static std::atomic<uintptr_t> next{1};
  return reinterpret_cast<cudaStream_t>((next.fetch_add(1) << 4) | 1u);
}

// Logs a capture step while recording; returns true then (the caller skips the CUDA call).
bool recorded(const char* name, cudaStream_t stream) {
  return detail::recording_library_call(name, stream);
}

}  // namespace

struct Graph::Impl {
  int device = -1;
  cudaStream_t stream = nullptr;  // the side stream it was captured on
  cudaStream_t pool = nullptr;    // the allocator's pool id while the graph exists
  cudaGraphExec_t exec = nullptr;
  bool captured = false;
};

bool is_capturing() {
  return tl_capturing;
}

void detail::throw_if_capturing(const char* what) {
  if (!tl_capturing) return;
  const std::string ctx = op_context();
  BRISK_THROW("cuda::Graph::capture: ", what, ctx.empty() ? "" : " ", ctx,
              ", which a CUDA graph cannot record: the GPU runs nothing while a graph is captured. Keep waits for "
              "the GPU (item(), copies to the host, synchronize()) and copies from host memory out of the captured "
              "function: copy inputs into tensors made before capture, and read results after replay()");
}

Graph::Graph() : impl_(std::make_unique<Impl>()) {}

Graph::~Graph() {
  try {
    reset();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; reset() already freed what it could
  }
}

bool Graph::captured() const {
  return impl_->captured;
}

void Graph::capture(const std::function<void()>& fn) {
  BRISK_CHECK(!impl_->captured, "cuda::Graph::capture: this graph already holds a capture; reset() it first");
  BRISK_CHECK(!tl_capturing, "cuda::Graph::capture: this thread is already capturing a graph (captures do not nest)");
  BRISK_CHECK(is_available(), "cuda::Graph::capture: no CUDA device is available (no GPU, or no NVIDIA driver)");
  const int device = current_device();
  // Work enqueued before the capture (and the frees it implies) completes first, so the captured
  // work starts from an idle device whatever stream it was on.
  synchronize(device);
  const Stream side = Stream::create(device);
  const cudaStream_t s = detail::native(side);
  const cudaStream_t pool = new_pool_id();
  StreamGuard guard(side);
  detail::allocator_begin_capture(device, s, pool);
  // Ends the capture on every path: discards a partial graph, hands the pool back on failure.
  auto finish = [&](bool ok) -> cudaGraph_t {
    tl_capturing = false;
    cudaGraph_t g = nullptr;
    cudaError_t err = cudaSuccess;
    if (!recorded("cudaStreamEndCapture", s)) err = cudaStreamEndCapture(s, &g);
    detail::allocator_end_capture(device);
    if (!ok || err != cudaSuccess) {
      if (g) (void)cudaGraphDestroy(g);
      (void)cudaGetLastError();
      detail::allocator_release_pool(device, pool, nullptr);
      if (ok)
        BRISK_THROW("cuda::Graph::capture: the capture was invalidated: ", cudaGetErrorString(err), " (",
                    cudaGetErrorName(err),
                    "). Something in the captured function called CUDA in a way a graph cannot record (a wait for "
                    "the GPU, a cudaMalloc or cudaFree from another thread, work on the legacy default stream)");
      return nullptr;
    }
    return g;
  };
  if (!recorded("cudaStreamBeginCapture", s)) {
    cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
      detail::allocator_end_capture(device);
      detail::allocator_release_pool(device, pool, nullptr);
      detail::throw_cuda_error(err, "cudaStreamBeginCapture", __FILE__, __LINE__);
    }
  }
  tl_capturing = true;
  try {
    fn();
  } catch (...) {
    finish(false);
    throw;
  }
  cudaGraph_t g = finish(true);
  if (!detail::recording()) {
    cudaError_t err = cudaGraphInstantiate(&impl_->exec, g, 0);
    (void)cudaGraphDestroy(g);
    if (err != cudaSuccess) {
      detail::allocator_release_pool(device, pool, nullptr);
      detail::throw_cuda_error(err, "cudaGraphInstantiate", __FILE__, __LINE__);
    }
  } else {
    recorded("cudaGraphInstantiate", s);
  }
  impl_->device = device;
  impl_->stream = s;
  impl_->pool = pool;
  impl_->captured = true;
}

void Graph::replay() {
  BRISK_CHECK(impl_->captured, "cuda::Graph::replay: nothing captured yet (call capture(fn) first)");
  BRISK_CHECK(!tl_capturing, "cuda::Graph::replay: cannot replay a graph while capturing another");
  DeviceGuard guard(impl_->device);
  const cudaStream_t stream = detail::current_native_stream(impl_->device);
  if (recorded("cudaGraphLaunch", stream)) return;
  BRISK_CUDA_CHECK(cudaGraphLaunch(impl_->exec, stream));
}

void Graph::reset() {
  if (!impl_->captured) return;
  impl_->captured = false;
  if (!detail::recording()) {
    detail::DeviceGuardNoThrow guard(impl_->device);
    (void)cudaDeviceSynchronize();  // a replay may still be running
    (void)cudaGraphExecDestroy(impl_->exec);
    (void)cudaGetLastError();
  }
  impl_->exec = nullptr;
  detail::allocator_release_pool(impl_->device, impl_->pool, nullptr);
}

}  // namespace brisk::cuda
