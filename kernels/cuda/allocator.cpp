// The caching CUDA allocator: a simple version of PyTorch's. Freed blocks go to a per-device
// free list keyed by size and are handed out again (best fit, at most 2x the request), so a
// training loop that allocates the same shapes every step stops calling cudaMalloc/cudaFree,
// which are slow and synchronise the device. Blocks are never split; when cudaMalloc fails
// the cache is emptied and the call retried once.
//
// All brisk work runs on the default stream for now, which orders every kernel, so a block
// freed by one tensor can be reused at once. (With several streams, each block must remember
// its stream and be reused only there, or after an event; see DESIGN.md "Storage".)
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "brisk/core/allocator.h"
#include "brisk/kernels/cuda.h"
#include "cuda/check.h"

namespace brisk::cuda {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;   // blocks up to 1 MiB ...
constexpr size_t kSmallRound = 512;               // ... are rounded to 512 bytes,
constexpr size_t kLargeRound = size_t{128} << 10; // larger ones to 128 KiB.

size_t round_size(size_t n) {
  size_t r = n <= kSmallLimit ? kSmallRound : kLargeRound;
  return (n + r - 1) / r * r;
}

struct DevicePool {
  std::multimap<size_t, void*> free_blocks;  // size -> pointer
  AllocatorStats stats;
};

struct Block {
  size_t size;
  int device;
};

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    BRISK_CHECK(is_available(), "cuda allocator: cannot allocate ", nbytes,
                " bytes: no CUDA device is available (no GPU, or no NVIDIA driver loaded)");
    int device = 0;
    BRISK_CUDA_CHECK(cudaGetDevice(&device));
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    DevicePool& pool = pool_for(device);
    auto it = pool.free_blocks.lower_bound(size);
    if (it != pool.free_blocks.end() && it->first <= 2 * size) {
      Block b{it->first, device};
      void* p = it->second;
      pool.free_blocks.erase(it);
      live_.emplace(p, b);
      pool.stats.allocated_bytes += static_cast<int64_t>(b.size);
      pool.stats.cached_blocks -= 1;
      pool.stats.cache_hits += 1;
      return p;
    }
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached(device, pool);
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      BRISK_THROW("cuda allocator: cannot allocate ", nbytes, " bytes on cuda:", device, ": ",
                  cudaGetErrorString(err), " (", pool.stats.allocated_bytes, " bytes in use, ",
                  pool.stats.reserved_bytes, " reserved)");
    }
    live_.emplace(p, Block{size, device});
    pool.stats.allocated_bytes += static_cast<int64_t>(size);
    pool.stats.reserved_bytes += static_cast<int64_t>(size);
    pool.stats.device_allocs += 1;
    return p;
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not ours: nothing sensible to do in a destructor path
    Block b = it->second;
    live_.erase(it);
    DevicePool& pool = pool_for(b.device);
    pool.free_blocks.emplace(b.size, ptr);
    pool.stats.allocated_bytes -= static_cast<int64_t>(b.size);
    pool.stats.cached_blocks += 1;
  }

  Device device() const override { return cuda_device(0); }

  AllocatorStats stats(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return pool_for(device).stats;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t d = 0; d < pools_.size(); ++d) release_cached(static_cast<int>(d), pools_[d]);
  }

 private:
  DevicePool& pool_for(int device) {
    if (static_cast<size_t>(device) >= pools_.size()) pools_.resize(static_cast<size_t>(device) + 1);
    return pools_[static_cast<size_t>(device)];
  }

  // Frees every cached block of one device (caller holds mu_).
  void release_cached(int device, DevicePool& pool) {
    if (pool.free_blocks.empty()) return;
    detail::DeviceGuard guard(device);
    for (auto& [size, p] : pool.free_blocks) {
      BRISK_CUDA_CHECK(cudaFree(p));
      pool.stats.reserved_bytes -= static_cast<int64_t>(size);
    }
    pool.stats.cached_blocks = 0;
    pool.free_blocks.clear();
  }

  std::mutex mu_;
  std::vector<DevicePool> pools_;
  std::unordered_map<void*, Block> live_;
};

// Deliberately never destroyed: at exit the CUDA runtime may already be torn down, and
// tensors in static objects may still free into the allocator.
CachingAllocator& caching_allocator() {
  static auto* a = new CachingAllocator;
  return *a;
}

}  // namespace

Allocator* detail::caching_allocator_instance() { return &caching_allocator(); }

AllocatorStats allocator_stats(int device) {
  BRISK_CHECK(device >= 0, "cuda::allocator_stats: bad device index ", device);
  return caching_allocator().stats(device);
}

void empty_cache() { caching_allocator().empty_cache(); }

}  // namespace brisk::cuda
