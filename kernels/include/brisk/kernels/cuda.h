// CUDA runtime queries and the caching allocator's controls. This header exists in every
// build: without CUDA support (or without a driver or GPU) device_count() is 0 and
// is_available() is false, so callers can branch at run time instead of with #ifdefs.
#pragma once
#include <cstdint>
#include <vector>

namespace brisk::cuda {

// Number of visible GPUs; 0 in a CPU-only build or when no driver/GPU is present.
int device_count();
// True when this build has CUDA support and at least one GPU can be used.
bool is_available();
// Waits for all work on `device` (-1: the current device). No-op without CUDA.
void synchronize(int device = -1);

// The caching allocator keeps freed device blocks in per-device free lists and hands them out
// again instead of calling cudaMalloc/cudaFree on every tensor (both synchronise the device).
struct AllocatorStats {
  int64_t allocated_bytes = 0;  // in blocks held by tensors (block sizes, i.e. rounded up)
  int64_t reserved_bytes = 0;   // obtained from cudaMalloc and not yet returned
  int64_t cached_blocks = 0;    // free blocks waiting for reuse
  int64_t device_allocs = 0;    // cudaMalloc calls so far
  int64_t cache_hits = 0;       // allocations served from the free lists
};
// Zeroes in a CPU-only build.
AllocatorStats allocator_stats(int device = 0);
// Returns every cached (free) block to the driver.
void empty_cache();

namespace checks {
// Run on the GPU to check that device code agrees with the host bit for bit; they throw
// brisk::Error when CUDA is unavailable.
// 4 words per counter: Philox::block(seed, first_counter + i) for i in [0, n).
std::vector<uint32_t> philox_on_device(uint64_t seed, uint64_t first_counter, int64_t n);
// Half (bf16 = false) or BFloat16 (bf16 = true) bits of each value, converted on the device.
std::vector<uint16_t> to_16bit_on_device(const std::vector<float>& values, bool bf16);
}  // namespace checks

}  // namespace brisk::cuda
