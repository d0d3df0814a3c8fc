// The CUDA entry points of a CPU-only build: no devices, and clear errors for device work.
// (A CUDA build compiles kernels/cuda/ instead and this file is empty.)
#ifndef BRISK_WITH_CUDA
#include "brisk/core/error.h"
#include "brisk/kernels/cuda.h"

namespace brisk::cuda {

int device_count() { return 0; }
bool is_available() { return false; }
void synchronize(int) {}
AllocatorStats allocator_stats(int) { return {}; }
void empty_cache() {}

namespace checks {
std::vector<uint32_t> philox_on_device(uint64_t, uint64_t, int64_t) {
  BRISK_THROW("cuda::checks::philox_on_device: this build of brisk has no CUDA support");
}
std::vector<uint16_t> to_16bit_on_device(const std::vector<float>&, bool) {
  BRISK_THROW("cuda::checks::to_16bit_on_device: this build of brisk has no CUDA support");
}
}  // namespace checks

}  // namespace brisk::cuda
#endif
