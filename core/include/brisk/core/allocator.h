// Allocators hand out device bytes; every allocation is counted under a memory category
// (parameters, gradients, optimizer state, activations, other) with a running peak, so
// memory use can be reported and tested.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "brisk/core/device.h"

namespace brisk {

enum class MemoryCategory : uint8_t { Parameters, Gradients, OptimizerState, Activations, Other };
inline constexpr int kNumMemoryCategories = 5;
const char* memory_category_name(MemoryCategory c);

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  // Allocates on a given device of the allocator's kind (the CUDA allocator serves every GPU;
  // others ignore the index).
  virtual void* allocate_on(Device device, size_t nbytes) {
    (void)device;
    return allocate(nbytes);
  }
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual Device device() const = 0;
};

// 64-byte aligned host memory, from a caching allocator: a freed block is kept in a free list and
// handed out again for a request of its size (or up to 1/8 smaller), so a training loop whose
// steps allocate the same tensors stops calling the system allocator after its first step, and
// large buffers are not page-faulted in again every step. The cache holds at most a limit of
// free bytes (BRISK_CPU_CACHE_MB, default 2048; 0 turns caching off); a block freed beyond it goes
// back to the system, and an allocation that fails empties the cache and tries again. Under
// AddressSanitizer caching is off, so use-after-free is still caught. docs/how-brisk-works.md,
// "CPU memory", explains.
Allocator* cpu_allocator();

struct CpuAllocatorStats {
  int64_t system_allocs = 0;  // blocks obtained from the system allocator so far
  int64_t system_frees = 0;   // blocks returned to it so far
  int64_t cache_hits = 0;     // allocations served from the free lists
  int64_t cached_blocks = 0;  // free blocks waiting for reuse now
  int64_t cached_bytes = 0;   // their bytes
  int64_t cache_limit_bytes = 0;
  bool caching = false;  // whether freed blocks are kept at all
};
CpuAllocatorStats cpu_allocator_stats();
// Returns every cached (free) CPU block to the system.
void cpu_empty_cache();
// The allocator for a device; throws brisk::Error for CUDA in a CPU-only build.
Allocator* allocator_for(Device d);
// CUDA builds register their allocator here at start-up (kept below core so core has no CUDA).
void register_allocator(DeviceKind kind, Allocator* a);
// Page-locked ("pinned") host memory, which the GPU can copy from and to asynchronously.
// nullptr unless a CUDA build registered one; such memory is CPU memory (Device kCPU).
Allocator* pinned_allocator();
void register_pinned_allocator(Allocator* a);

struct MemoryStats {
  std::array<int64_t, kNumMemoryCategories> current{};
  std::array<int64_t, kNumMemoryCategories> peak{};
  int64_t total_current = 0;
  int64_t total_peak = 0;
};

// Byte counters per device kind (all CPU memory together, all CUDA memory together).
MemoryStats memory_stats(DeviceKind kind = DeviceKind::CPU);
void reset_peak_memory_stats(DeviceKind kind = DeviceKind::CPU);
// A one-line-per-category human-readable report.
std::string memory_report(DeviceKind kind = DeviceKind::CPU);

namespace detail {
void count_alloc(DeviceKind kind, MemoryCategory c, int64_t nbytes);  // nbytes may be negative
}

}  // namespace brisk
