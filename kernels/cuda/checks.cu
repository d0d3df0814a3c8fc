// Device-side self checks: Philox and the 16-bit conversions run in a kernel, so tests can
// compare them bit for bit with the host code (the same headers compile for both).
#include <vector>

#include "brisk/core/half.h"
#include "brisk/core/rng.h"
#include "brisk/kernels/cuda.h"
#include "cuda/runtime.h"

namespace brisk::cuda::checks {

namespace {

__global__ void philox_kernel(uint64_t seed, uint64_t first, int64_t n, uint32_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) Philox::block(seed, first + static_cast<uint64_t>(i), out + 4 * i);
}

__global__ void to_16bit_kernel(const float* in, int64_t n, bool bf16, uint16_t* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = bf16 ? BFloat16(in[i]).bits : Half(in[i]).bits;
}

// Owns one cudaMalloc'd buffer for the length of a check.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  explicit DeviceBuffer(size_t n) { BRISK_CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>((n + 255) / 256);
}

}  // namespace

std::vector<uint32_t> philox_on_device(uint64_t seed, uint64_t first_counter, int64_t n) {
  BRISK_CHECK(is_available(), "cuda::checks::philox_on_device: no CUDA device is available");
  BRISK_CHECK(n >= 0, "cuda::checks::philox_on_device: n must be non-negative, got ", n);
  std::vector<uint32_t> out(static_cast<size_t>(4 * n));
  if (n == 0) return out;
  DeviceBuffer<uint32_t> d(out.size());
  philox_kernel<<<blocks_for(n), 256>>>(seed, first_counter, n, d.ptr);
  BRISK_CUDA_CHECK(cudaGetLastError());
  BRISK_CUDA_CHECK(cudaMemcpy(out.data(), d.ptr, out.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  return out;
}

std::vector<uint16_t> to_16bit_on_device(const std::vector<float>& values, bool bf16) {
  BRISK_CHECK(is_available(), "cuda::checks::to_16bit_on_device: no CUDA device is available");
  const auto n = static_cast<int64_t>(values.size());
  std::vector<uint16_t> out(values.size());
  if (n == 0) return out;
  DeviceBuffer<float> in(values.size());
  DeviceBuffer<uint16_t> d(values.size());
  BRISK_CUDA_CHECK(cudaMemcpy(in.ptr, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
  to_16bit_kernel<<<blocks_for(n), 256>>>(in.ptr, n, bf16, d.ptr);
  BRISK_CUDA_CHECK(cudaGetLastError());
  BRISK_CUDA_CHECK(cudaMemcpy(out.data(), d.ptr, out.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace brisk::cuda::checks
