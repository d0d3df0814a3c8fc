// The caching CUDA allocator, a simple version of PyTorch's. A freed block goes back to the
// free list of the (device, stream) it was allocated on and is handed out again to a later
// request on that stream (best fit, at most twice the request), so a training loop that
// allocates the same shapes every step stops calling cudaMalloc/cudaFree, which are slow and
// synchronise the device. Work on one stream runs in order, so a block freed by one kernel's
// tensor can be reused by the next kernel on that stream at once. A block that was also used on
// other streams (record_stream) waits until events recorded on those streams have completed.
// Blocks are never split; when cudaMalloc fails the cache is emptied and the call retried once.
//
// CUDA graph capture (graph.cpp): while a capture runs on a stream, that stream's allocations are
// keyed by the graph's private pool id (a fake stream handle) instead of the stream, so the blocks
// the captured work uses are handed out again only inside that capture; a block freed during the
// capture, whatever stream it came from, joins the pool too (the recorded work may still use it at
// every replay). Released pools become ordinary cache of a real stream. cudaMalloc during a capture
// runs in relaxed capture mode (the block outlives the capture; nothing is recorded).
//
// The pinned host allocator caches page-locked blocks the same way; a block used by an
// asynchronous copy is not reused until that copy's stream has passed it.
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "brisk/core/allocator.h"
#include "cuda/runtime.h"

namespace brisk::cuda {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;    // blocks up to 1 MiB ...
constexpr size_t kSmallRound = 512;                // ... are rounded to 512 bytes,
constexpr size_t kLargeRound = size_t{128} << 10;  // larger ones to 128 KiB.

size_t round_size(size_t n) {
  size_t r = n <= kSmallLimit ? kSmallRound : kLargeRound;
  return (n + r - 1) / r * r;
}

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  int device = 0;
  cudaStream_t stream = nullptr;      // the stream it was allocated on
  std::vector<cudaStream_t> used_on;  // other streams (record_stream)
  std::vector<cudaEvent_t> pending;   // events to pass before reuse (after free)
};

using FreeKey = std::pair<cudaStream_t, size_t>;

struct DevicePool {
  std::multimap<FreeKey, Block*> free_blocks;  // (stream, size) -> block
  std::vector<Block*> waiting;                 // freed, waiting for their events
  AllocatorStats stats;
  // Graph capture: the capturing stream and the pool id its allocations are keyed by (capture is
  // null when none runs); every live pool id; blocks a pool holds back until it is released
  // (freed during capture after use on other streams); released pool ids -> the stream their
  // blocks now belong to.
  cudaStream_t capture = nullptr, capture_pool = nullptr;
  std::set<cudaStream_t> pools;
  std::multimap<cudaStream_t, Block*> held;
  std::unordered_map<cudaStream_t, cudaStream_t> released;
};

// Switches the calling thread to relaxed stream-capture mode for a scope, so that cudaMalloc may
// run during a capture (a no-op while recording).
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(bool on) : on_(on && !detail::recording()) {
    if (on_) (void)cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  ~RelaxedCaptureMode() {
    if (on_) (void)cudaThreadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  bool on_;
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override { return allocate_on(cuda_device(current_device()), nbytes); }

  void* allocate_on(Device d, size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    BRISK_CHECK(is_available(), "cuda allocator: cannot allocate ", nbytes,
                " bytes: no CUDA device is available (no GPU, or no NVIDIA driver loaded)");
    const int device = d.index;
    BRISK_CHECK(device >= 0 && device < device_count(), "cuda allocator: device ", d.str(), " does not exist (",
                device_count(), " CUDA devices visible)");
    const cudaStream_t current = detail::native(current_stream(device));
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    DevicePool& pool = pool_for(device);
    const bool capturing = pool.capture != nullptr;
    // The free-list key: the graph's pool while its stream captures, else the stream.
    const cudaStream_t stream = capturing && current == pool.capture ? pool.capture_pool : current;
    if (!capturing) process_waiting(pool);  // event queries are not allowed during a capture
    auto it = pool.free_blocks.lower_bound({stream, size});
    bool hit = it != pool.free_blocks.end() && it->first.first == stream && it->first.second <= 2 * size;
    // A capture may also take free blocks of its own stream and of the default stream (where eager
    // warm-up steps and released pools leave them): the device was idle when the capture began.
    for (const cudaStream_t other : {current, cudaStream_t{nullptr}}) {
      if (hit || stream == current) break;
      it = pool.free_blocks.lower_bound({other, size});
      hit = it != pool.free_blocks.end() && it->first.first == other && it->first.second <= 2 * size;
    }
    if (hit) {
      Block* b = it->second;
      b->stream = stream;
      pool.free_blocks.erase(it);
      live_.emplace(b->ptr, b);
      pool.stats.cached_blocks -= 1;
      pool.stats.cache_hits += 1;
      add_allocated(pool, static_cast<int64_t>(b->size));
      return b->ptr;
    }
    void* p = nullptr;
    try {
      RelaxedCaptureMode relaxed(capturing);
      p = detail::raw_malloc(size, device);
    } catch (const Error& e) {
      BRISK_CHECK(!capturing, "cuda allocator: cannot allocate ", nbytes, " bytes on cuda:", device,
                  " during CUDA graph capture (", pool.stats.allocated_bytes, " bytes in use, ",
                  pool.stats.reserved_bytes, " reserved; the cache cannot be freed while capturing): ", e.message());
      release_cached(pool);  // cudaMalloc failed: give the cache back and try once more
      try {
        p = detail::raw_malloc(size, device);
      } catch (const Error& e) {
        BRISK_THROW("cuda allocator: cannot allocate ", nbytes, " bytes on cuda:", device, " (",
                    pool.stats.allocated_bytes, " bytes in use, ", pool.stats.reserved_bytes,
                    " reserved): ", e.message());
      }
    }
    auto* b = new Block{p, size, device, stream, {}, {}};
    live_.emplace(p, b);
    pool.stats.device_allocs += 1;
    pool.stats.reserved_bytes += static_cast<int64_t>(size);
    pool.stats.peak_reserved_bytes = std::max(pool.stats.peak_reserved_bytes, pool.stats.reserved_bytes);
    add_allocated(pool, static_cast<int64_t>(size));
    return p;
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not ours: nothing sensible to do in a destructor path
    Block* b = it->second;
    live_.erase(it);
    DevicePool& pool = pool_for(b->device);
    pool.stats.allocated_bytes -= static_cast<int64_t>(b->size);
    if (auto r = pool.released.find(b->stream); r != pool.released.end()) b->stream = r->second;
    if (pool.capture != nullptr) {
      // Freed while a graph captures: the recorded work may use the block at every replay.
      if (!pool.pools.contains(b->stream)) b->stream = pool.capture_pool;
      if (!b->used_on.empty()) {
        // Also used on other captured streams: reuse inside the capture could race; keep it aside.
        b->used_on.clear();
        pool.held.emplace(b->stream, b);
        return;
      }
    }
    if (!b->used_on.empty() && !detail::recording()) {
      // Used on other streams: reusable only once those streams have passed this point.
      detail::DeviceGuardNoThrow guard(b->device);
      for (cudaStream_t s : b->used_on) {
        cudaEvent_t e = nullptr;
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess && cudaEventRecord(e, s) == cudaSuccess)
          b->pending.push_back(e);
        else
          (void)cudaGetLastError();
      }
      b->used_on.clear();
      pool.waiting.push_back(b);
      return;
    }
    b->used_on.clear();
    pool.free_blocks.emplace(FreeKey{b->stream, b->size}, b);
    pool.stats.cached_blocks += 1;
  }

  Device device() const override { return cuda_device(0); }

  void record_stream(void* ptr, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    BRISK_CHECK(it != live_.end(),
                "cuda::record_stream: the tensor's memory was not allocated by brisk's CUDA allocator");
    Block* b = it->second;
    if (s == b->stream) return;
    for (cudaStream_t u : b->used_on)
      if (u == s) return;
    b->used_on.push_back(s);
  }

  AllocatorStats stats(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_for(device).stats;
  }

  void reset_peak(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    AllocatorStats& s = pool_for(device).stats;
    s.peak_allocated_bytes = s.allocated_bytes;
    s.peak_reserved_bytes = s.reserved_bytes;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (DevicePool& p : pools_)
      if (p.capture == nullptr) release_cached(p);  // cudaFree is not allowed during a capture
  }

  void begin_capture(int device, cudaStream_t stream, cudaStream_t graph_pool) {
    std::lock_guard<std::mutex> lock(mu_);
    DevicePool& pool = pool_for(device);
    BRISK_CHECK(pool.capture == nullptr, "cuda::Graph::capture: another capture is running on cuda:", device);
    pool.capture = stream;
    pool.capture_pool = graph_pool;
    pool.pools.insert(graph_pool);
  }

  void end_capture(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    DevicePool& pool = pool_for(device);
    pool.capture = nullptr;
    pool.capture_pool = nullptr;
  }

  // The graph is gone (and the device idle): its pool's blocks become cache of `reuse_on` (graph.cpp
  // passes the default stream), now (free and held ones) or when their tensors free them.
  void release_pool(int device, cudaStream_t graph_pool, cudaStream_t reuse_on) {
    std::lock_guard<std::mutex> lock(mu_);
    DevicePool& pool = pool_for(device);
    if (!pool.pools.erase(graph_pool)) return;
    for (auto it = pool.free_blocks.lower_bound({graph_pool, 0});
         it != pool.free_blocks.end() && it->first.first == graph_pool;) {
      Block* b = it->second;
      it = pool.free_blocks.erase(it);
      b->stream = reuse_on;
      pool.free_blocks.emplace(FreeKey{reuse_on, b->size}, b);
    }
    auto [from, to] = pool.held.equal_range(graph_pool);
    for (auto it = from; it != to; ++it) {
      it->second->stream = reuse_on;
      pool.free_blocks.emplace(FreeKey{reuse_on, it->second->size}, it->second);
      pool.stats.cached_blocks += 1;
    }
    pool.held.erase(from, to);
    pool.released[graph_pool] = reuse_on;
  }

 private:
  DevicePool& pool_for(int device) {
    if (static_cast<size_t>(device) >= pools_.size()) pools_.resize(static_cast<size_t>(device) + 1);
    return pools_[static_cast<size_t>(device)];
  }

  static void add_allocated(DevicePool& pool, int64_t n) {
    pool.stats.allocated_bytes += n;
    pool.stats.peak_allocated_bytes = std::max(pool.stats.peak_allocated_bytes, pool.stats.allocated_bytes);
  }

  // Moves blocks whose events have all completed back to the free lists (caller holds mu_).
  void process_waiting(DevicePool& pool) {
    for (size_t i = 0; i < pool.waiting.size();) {
      Block* b = pool.waiting[i];
      bool done = true;
      for (cudaEvent_t e : b->pending) {
        cudaError_t err = cudaEventQuery(e);
        if (err == cudaErrorNotReady) {
          (void)cudaGetLastError();
          done = false;
          break;
        }
      }
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t e : b->pending) (void)cudaEventDestroy(e);
      b->pending.clear();
      pool.free_blocks.emplace(FreeKey{b->stream, b->size}, b);
      pool.stats.cached_blocks += 1;
      pool.waiting[i] = pool.waiting.back();
      pool.waiting.pop_back();
    }
  }

  // Frees every cached block of one device (caller holds mu_).
  // A graph's pool keeps its free blocks: the recorded work uses them at every replay.
  void release_cached(DevicePool& pool) {
    for (auto it = pool.free_blocks.begin(); it != pool.free_blocks.end();) {
      Block* b = it->second;
      if (pool.pools.contains(it->first.first)) {
        ++it;
        continue;
      }
      detail::raw_free(b->ptr, b->device);
      pool.stats.reserved_bytes -= static_cast<int64_t>(b->size);
      pool.stats.device_frees += 1;
      pool.stats.cached_blocks -= 1;
      delete b;
      it = pool.free_blocks.erase(it);
    }
  }

  std::mutex mu_;
  std::vector<DevicePool> pools_;
  std::unordered_map<void*, Block*> live_;
};

// Deliberately never destroyed: at exit the CUDA runtime may already be torn down, and
// tensors in static objects may still free into the allocator.
CachingAllocator& caching_allocator() {
  static auto* a = new CachingAllocator;
  return *a;
}

// --- pinned host memory -------------------------------------------------------------------------
struct HostBlock {
  void* ptr = nullptr;
  size_t size = 0;
  bool fake = false;                 // plain host memory made while recording
  std::vector<cudaEvent_t> pending;  // copies that may still read or write it
};

class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.lower_bound(size); it != free_.end() && it->first <= 2 * size; ++it) {
      HostBlock* b = it->second;
      if (!ready(b)) continue;
      free_.erase(it);
      live_.emplace(b->ptr, b);
      return b->ptr;
    }
    auto* b = new HostBlock;
    b->size = size;
    if (detail::recording()) {
      b->ptr = std::aligned_alloc(256, size);
      b->fake = true;
      BRISK_CHECK(b->ptr, "pinned allocator: out of host memory allocating ", nbytes, " bytes");
    } else {
      BRISK_CUDA_CHECK(cudaHostAlloc(&b->ptr, size, cudaHostAllocDefault));
    }
    live_.emplace(b->ptr, b);
    return b->ptr;
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    HostBlock* b = it->second;
    live_.erase(it);
    free_.emplace(b->size, b);
  }

  Device device() const override { return kCPU; }

  // The block containing p, if pinned by this allocator (caller holds mu_).
  HostBlock* find(const void* p) {
    auto it = live_.upper_bound(const_cast<void*>(p));
    if (it == live_.begin()) return nullptr;
    --it;
    HostBlock* b = it->second;
    const char* base = static_cast<const char*>(b->ptr);
    return static_cast<const char*>(p) < base + b->size ? b : nullptr;
  }

  bool contains(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return find(p) != nullptr;
  }

  void record_use(const void* p, cudaStream_t s) {
    if (detail::recording()) return;
    std::lock_guard<std::mutex> lock(mu_);
    HostBlock* b = find(p);
    if (!b) return;
    cudaEvent_t e = nullptr;
    BRISK_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    BRISK_CUDA_CHECK(cudaEventRecord(e, s));
    b->pending.push_back(e);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end();) {
      HostBlock* b = it->second;
      if (b->fake || ready(b)) {
        if (b->fake)
          std::free(b->ptr);
        else
          (void)cudaFreeHost(b->ptr);
        delete b;
        it = free_.erase(it);
      } else {
        ++it;
      }
    }
  }

 private:
  // True once every copy that used the block has finished (caller holds mu_).
  static bool ready(HostBlock* b) {
    for (size_t i = 0; i < b->pending.size();) {
      cudaError_t err = cudaEventQuery(b->pending[i]);
      if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
      }
      (void)cudaEventDestroy(b->pending[i]);
      b->pending[i] = b->pending.back();
      b->pending.pop_back();
    }
    return true;
  }

  std::mutex mu_;
  std::multimap<size_t, HostBlock*> free_;
  std::map<void*, HostBlock*> live_;  // ordered: find() looks up the block containing a pointer
};

PinnedAllocator& pinned_allocator_ref() {
  static auto* a = new PinnedAllocator;
  return *a;
}

}  // namespace

Allocator* detail::caching_allocator_instance() {
  return &caching_allocator();
}
Allocator* detail::pinned_allocator_instance() {
  return &pinned_allocator_ref();
}

void detail::allocator_begin_capture(int device, cudaStream_t stream, cudaStream_t graph_pool) {
  caching_allocator().begin_capture(device, stream, graph_pool);
}
void detail::allocator_end_capture(int device) {
  caching_allocator().end_capture(device);
}
void detail::allocator_release_pool(int device, cudaStream_t graph_pool, cudaStream_t reuse_on) {
  caching_allocator().release_pool(device, graph_pool, reuse_on);
}

void detail::allocator_record_stream(void* ptr, cudaStream_t use_stream) {
  caching_allocator().record_stream(ptr, use_stream);
}

void detail::pinned_record_use(const void* ptr, cudaStream_t stream) {
  pinned_allocator_ref().record_use(ptr, stream);
}

bool detail::is_pinned_pointer(const void* p) {
  return pinned_allocator_ref().contains(p);
}

AllocatorStats allocator_stats(int device) {
  BRISK_CHECK(device >= 0, "cuda::allocator_stats: bad device index ", device);
  return caching_allocator().stats(device);
}

void reset_peak_stats(int device) {
  BRISK_CHECK(device >= 0, "cuda::reset_peak_stats: bad device index ", device);
  caching_allocator().reset_peak(device);
}

void empty_cache() {
  caching_allocator().empty_cache();
  pinned_allocator_ref().empty_cache();
}

void record_stream(const Tensor& t, const Stream& s) {
  BRISK_CHECK(t.defined() && t.device().is_cuda(), "cuda::record_stream: expected a CUDA tensor, got ",
              t.defined() ? t.device().str() : std::string("an undefined tensor"));
  BRISK_CHECK(t.device().index == s.device(), "cuda::record_stream: tensor on ", t.device().str(),
              " but stream on cuda:", s.device());
  if (!t.storage()->data()) return;
  caching_allocator().record_stream(t.storage()->data(), detail::native(s));
}

}  // namespace brisk::cuda
