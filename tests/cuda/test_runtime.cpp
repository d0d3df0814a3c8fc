// The CUDA runtime on a real GPU: device queries work in every build; with a GPU, tensors
// round-trip CPU -> CUDA -> CPU, the caching allocator reuses blocks, and device code agrees with
// the host. Without a GPU the GPU tests skip, saying why (test_recording.cpp checks the same
// host-side logic without one).
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/elementwise.h>

#include "cuda/gpu_skip.h"

using namespace brisk;

TEST(Cuda, AvailabilityIsConsistentWithTheDeviceCount) {
  const int n = cuda::device_count();
  EXPECT_EQ(cuda::is_available(), n > 0);
  // Exactly devices 0 .. n-1 exist: each has real properties, and device n cannot be used.
  for (int d = 0; d < n; ++d) {
    const cuda::DeviceProperties p = cuda::device_properties(d);
    EXPECT_FALSE(p.name.empty()) << "device " << d;
    EXPECT_GE(p.major, 5) << "device " << d << ": compute capability " << p.major << "." << p.minor;
    EXPECT_GT(p.total_memory, int64_t{1} << 28) << "device " << d;
    EXPECT_GT(p.multiprocessors, 0) << "device " << d;
  }
  EXPECT_THROW(cuda::set_device(n), Error) << "device " << n << " of " << n;
  if (!BRISK_BUILD_WITH_CUDA) {
    EXPECT_EQ(cuda::device_count(), 0);
  }
  EXPECT_NO_THROW(cuda::synchronize());
  if (!cuda::is_available()) {
    const cuda::AllocatorStats s = cuda::allocator_stats();
    EXPECT_EQ(s.allocated_bytes, 0) << "nothing can be allocated without a GPU";
    EXPECT_EQ(s.device_allocs, 0);
  }
}

// Tensors on a GPU that is not there (any GPU without one; cuda:N past the last with one) fail
// with a brisk::Error that says CUDA, not a crash.
TEST(Cuda, CudaTensorsOnAMissingDeviceFailWithAClearError) {
  const int missing = cuda::device_count();
  try {
    empty({4}, DType::F32, cuda_device(missing));
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_NE(m.find("cuda"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kernels::to_device(ones({2}), cuda_device(missing)), Error);
  if (!cuda::is_available()) {
    EXPECT_THROW(cuda::checks::philox_on_device(0, 0, 1), Error);
  }
}

TEST(Cuda, TensorsRoundTripThroughTheDevice) {
  SKIP_WITHOUT_GPU();
  manual_seed(1);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::U8}) {
    Tensor x = randint(0, 100, {3, 5}, {.dtype = dt});
    Tensor y = kernels::to_device(x, cuda_device());
    EXPECT_TRUE(y.device().is_cuda());
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.sizes(), x.sizes());
    EXPECT_EQ(y.to_vector<double>(), x.to_vector<double>()) << "read straight from the device, " << dt;
    Tensor back = kernels::to_device(y, kCPU);
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_EQ(back.to_vector<double>(), x.to_vector<double>()) << dt;
  }
  Tensor one = kernels::to_device(full({}, 2.5), cuda_device());
  EXPECT_EQ(one.item<float>(), 2.5f);
  EXPECT_NE(to_string(one).find("device=cuda:0"), std::string::npos) << to_string(one);
}

TEST(Cuda, DeviceToDeviceCopiesBytes) {
  SKIP_WITHOUT_GPU();
  Tensor src = kernels::to_device(arange(0.0, 1000.0, 1.0, {.dtype = DType::F32}), cuda_device());
  Tensor dst = empty({1000}, DType::F32, cuda_device());
  copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), src.nbytes());
  EXPECT_EQ(dst.to_vector<float>(), src.to_vector<float>());
}

TEST(Cuda, CachingAllocatorReusesFreedBlocks) {
  SKIP_WITHOUT_GPU();
  const int64_t cuda_bytes = memory_stats(DeviceKind::CUDA).total_current;
  { Tensor warm = empty({1000}, DType::F32, cuda_device()); }  // leaves one cached block
  cuda::AllocatorStats before = cuda::allocator_stats(0);
  EXPECT_GE(before.cached_blocks, 1);
  for (int i = 0; i < 10; ++i) {
    Tensor t = empty({1000}, DType::F32, cuda_device());
    EXPECT_EQ(memory_stats(DeviceKind::CUDA).total_current, cuda_bytes + 4000);
  }
  cuda::AllocatorStats after = cuda::allocator_stats(0);
  EXPECT_EQ(after.device_allocs, before.device_allocs) << "no cudaMalloc: the freed block came back";
  EXPECT_EQ(after.cache_hits, before.cache_hits + 10);
  EXPECT_EQ(memory_stats(DeviceKind::CUDA).total_current, cuda_bytes);
  // Two live tensors cannot share a block.
  Tensor a = empty({1000}, DType::F32, cuda_device()), b = empty({1000}, DType::F32, cuda_device());
  EXPECT_NE(a.data_ptr(), b.data_ptr());
}

TEST(Cuda, EmptyCacheReturnsFreeBlocksToTheDriver) {
  SKIP_WITHOUT_GPU();
  { Tensor t = empty({1 << 20}, DType::F32, cuda_device()); }
  EXPECT_GE(cuda::allocator_stats(0).cached_blocks, 1);
  cuda::empty_cache();
  cuda::AllocatorStats s = cuda::allocator_stats(0);
  EXPECT_EQ(s.cached_blocks, 0);
  EXPECT_EQ(s.reserved_bytes, s.allocated_bytes);
}

TEST(Cuda, DevicePhiloxMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  const uint64_t seed = 0x243f6a8885a308d3ull, first = (uint64_t{1} << 32) - 100;  // crosses a word
  std::vector<uint32_t> dev = cuda::checks::philox_on_device(seed, first, 1000);
  ASSERT_EQ(dev.size(), 4000u);
  for (int64_t i = 0; i < 1000; ++i) {
    uint32_t host[4];
    Philox::block(seed, first + static_cast<uint64_t>(i), host);
    for (int w = 0; w < 4; ++w) ASSERT_EQ(dev[4 * i + w], host[w]) << "counter " << i << " word " << w;
  }
}

TEST(Cuda, Device16BitConversionsMatchTheHost) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> v(1 << 20);
  for (float& f : v) {
    uint32_t u = bits(rng);
    std::memcpy(&f, &u, 4);
  }
  std::vector<uint16_t> half = cuda::checks::to_16bit_on_device(v, false);
  std::vector<uint16_t> bf16 = cuda::checks::to_16bit_on_device(v, true);
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(half[i], Half(v[i]).bits) << i;
    ASSERT_EQ(bf16[i], BFloat16(v[i]).bits) << i;
  }
}
