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

// 64-byte aligned host memory.
Allocator* cpu_allocator();
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
