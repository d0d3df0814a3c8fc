// The CUDA runtime as brisk users see it: devices, streams, events, the caching allocator's
// statistics, pinned host memory and the math settings (TF32). This header exists in every
// build: without CUDA support (or without a driver or GPU) device_count() is 0 and
// is_available() is false, so callers branch at run time instead of with #ifdefs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::cuda {

// --- devices --------------------------------------------------------------------------------
// Number of visible GPUs (CUDA_VISIBLE_DEVICES applies); 0 in a CPU-only build or without a
// driver or GPU.
int device_count();
// True when this build has CUDA support and at least one GPU can be used.
bool is_available();
// Waits for all work on `device` (-1: the current device). No-op without CUDA.
void synchronize(int device = -1);
// The calling thread's current device (0 without CUDA), and setting it.
int current_device();
void set_device(int device);

// Sets the current device for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();  // NOLINT(performance-trivially-destructible): not trivial with CUDA
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  [[maybe_unused]] int prev_ = 0;  // unused in a CPU-only build (the guard does nothing there)
};

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int64_t total_memory = 0;  // bytes
  int multiprocessors = 0;
};
DeviceProperties device_properties(int device = 0);

// Library versions for `brisk env` (0 when unknown or absent): CUDA runtime and driver
// (1000 * major + 10 * minor), cuBLAS and cuDNN as their libraries report them.
struct Versions {
  int runtime = 0, driver = 0, cublas = 0, cudnn = 0;
};
Versions versions();

// --- streams and events ---------------------------------------------------------------------
// A CUDA stream on one device: work on one stream runs in order; work on different streams may
// overlap. Each thread has a current stream per device (the default stream until set), which
// every brisk kernel launches on. The handle is a cudaStream_t.
class Stream {
 public:
  Stream() = default;  // the default (legacy) stream of device 0
  // A new stream on `device` (-1: current) that does not synchronise with the default stream.
  // Streams come from a per-device pool and live as long as the process.
  static Stream create(int device = -1, bool high_priority = false);
  static Stream default_stream(int device = -1);

  void* handle() const { return handle_; }
  int device() const { return device_; }
  // Blocks until every piece of work enqueued so far has finished.
  void synchronize() const;
  // True when the stream has no pending work.
  bool query() const;
  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_ == o.device_; }

 private:
  Stream(void* h, int device) : handle_(h), device_(device) {}
  void* handle_ = nullptr;
  int device_ = 0;
  friend Stream current_stream(int);
  friend Stream stream_from_handle(void*, int);
};
// The calling thread's current stream on `device` (-1: the current device).
Stream current_stream(int device = -1);
void set_current_stream(const Stream& s);
Stream stream_from_handle(void* handle, int device);

// Makes `s` the current stream of its device for a scope (and that device current).
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();  // NOLINT(performance-trivially-destructible): not trivial with CUDA
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_stream_;
  [[maybe_unused]] int prev_device_ = 0;  // unused in a CPU-only build
};

// A CUDA event: a marker in a stream that other streams or the host can wait for.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  ~Event();  // NOLINT(performance-trivially-destructible): not trivial with CUDA
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the current end of `s`'s work.
  void record(const Stream& s);
  void record() { record(current_stream()); }
  // Makes `s` wait (on the device, the host does not block) for the recorded work.
  void wait(const Stream& s) const;
  // Blocks the host until the recorded work has finished.
  void synchronize() const;
  bool query() const;
  // Milliseconds between this event and `end` (both recorded with enable_timing).
  float elapsed_ms(const Event& end) const;
  void* handle() const { return handle_; }

 private:
  void create(int device);
  void* handle_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
};

// --- the caching allocator ------------------------------------------------------------------
// Freed device blocks go back to a free list of the (device, stream) they were allocated on and
// are handed out again instead of calling cudaMalloc/cudaFree (both synchronise the device).
struct AllocatorStats {
  int64_t allocated_bytes = 0;       // in blocks held by tensors (block sizes, i.e. rounded up)
  int64_t peak_allocated_bytes = 0;  // since the start or reset_peak_stats()
  int64_t reserved_bytes = 0;        // obtained from cudaMalloc and not yet returned
  int64_t peak_reserved_bytes = 0;
  int64_t cached_blocks = 0;  // free blocks waiting for reuse
  int64_t device_allocs = 0;  // cudaMalloc calls so far
  int64_t device_frees = 0;   // cudaFree calls so far
  int64_t cache_hits = 0;     // allocations served from the free lists
};
// Zeroes in a CPU-only build.
AllocatorStats allocator_stats(int device = 0);
void reset_peak_stats(int device = 0);
// Returns every cached (free) block to the driver.
void empty_cache();
// Tells the allocator that `t`'s memory is used by work on stream `s` (other than the one it
// was allocated on), so the block is not reused before that work finishes. Needed whenever a
// tensor made on one stream is read or written on another (PyTorch's record_stream).
void record_stream(const Tensor& t, const Stream& s);

// --- CUDA graphs -----------------------------------------------------------------------------
// A recorded sequence of GPU work that replays with one launch (torch.cuda.CUDAGraph):
// capture(fn) runs fn once with the GPU in capture mode, so the kernels, library calls and
// device-to-device copies it enqueues are recorded instead of run; replay() then launches all
// of them on the current stream with one call. A training step of a small model is thousands of
// launches whose CPU cost can exceed the GPU's work; a replay costs a few microseconds.
//
// The recorded work reads and writes the same addresses at every replay, so:
//  - inputs go into tensors made before capture (copy each new batch into them), and results
//    are read from the tensors the captured code returned, after replay();
//  - memory the captured code allocates comes from a pool private to the graph, kept until
//    reset() or destruction, so no other tensor ever reuses it while the graph can replay;
//  - values fixed on the host while capturing stay fixed: learning rates and step counts must
//    live on the GPU (optim::AdamOptions::capturable), random numbers (dropout) repeat.
// While capturing, nothing may wait for the GPU (item(), copies to the host, synchronize()) or
// copy host memory to the GPU: brisk throws a brisk::Error naming the op, and the capture is
// abandoned. Warm up (run fn eagerly a few times) before capturing, so that libraries have made
// their handles and workspaces. docs/cuda-graphs.md walks through a graphed training step.
class Graph {
 public:
  Graph();
  ~Graph();  // waits for the GPU when the graph was captured (it may be replaying)
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Records fn's GPU work on the current device. fn runs on a side stream that waits for the
  // current stream first; the current stream is restored afterwards. Throws when already captured
  // (reset() first), without a GPU, or when fn throws or does something capture cannot record.
  void capture(const std::function<void()>& fn);
  // Runs the recorded work on the current stream (asynchronously, like any kernel).
  void replay();
  bool captured() const;
  // Frees the recorded graph and returns its private memory pool (waits for the GPU first).
  void reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// True while the calling thread is inside Graph::capture.
bool is_capturing();

// --- pinned host memory ---------------------------------------------------------------------
// An uninitialised CPU tensor in page-locked memory: copies between it and a GPU can run
// asynchronously (to(device, non_blocking = true)). Plain CPU memory without CUDA.
Tensor empty_pinned(const Shape& sizes, DType dtype);
// A pinned copy of a CPU tensor (t itself when already pinned; a plain copy without CUDA).
Tensor pin_memory(const Tensor& t);

// --- math settings (PyTorch's defaults) -------------------------------------------------------
// TF32 tensor cores for f32 matrix products: off by default (torch.backends.cuda.matmul.allow_tf32).
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();
// Split-K partial sums of f16/bf16 matrix products may be reduced in the output's 16-bit type
// (cuBLASLt's in-place and output-type reduction schemes), which is faster for some shapes: on by
// default, as PyTorch's torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction and
// allow_fp16_reduced_precision_reduction. Off: partial sums are always reduced in fp32.
void set_matmul_allow_reduced_precision_reduction(bool allow);
bool matmul_allow_reduced_precision_reduction();
// TF32 for cuDNN convolutions: on by default (torch.backends.cudnn.allow_tf32).
void set_cudnn_allow_tf32(bool allow);
bool cudnn_allow_tf32();
// Time cuDNN's convolution algorithms on first use of each shape and keep the fastest, instead of
// taking its heuristics' first choice: off by default (torch.backends.cudnn.benchmark).
void set_cudnn_benchmark(bool on);
bool cudnn_benchmark();

namespace checks {
// Run on the GPU to check that device code agrees with the host bit for bit; they throw
// brisk::Error when CUDA is unavailable.
// 4 words per counter: Philox::block(seed, first_counter + i) for i in [0, n).
std::vector<uint32_t> philox_on_device(uint64_t seed, uint64_t first_counter, int64_t n);
// Half (bf16 = false) or BFloat16 (bf16 = true) bits of each value, converted on the device.
std::vector<uint16_t> to_16bit_on_device(const std::vector<float>& values, bool bf16);
}  // namespace checks

}  // namespace brisk::cuda
