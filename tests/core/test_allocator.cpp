// The caching CPU allocator: freed blocks are handed out again (same size, or up to 1/8
// smaller), never for a much smaller request, and empty_cache returns them to the system.
#include <gtest/gtest.h>

#include <brisk/core/allocator.h>
#include <brisk/core/tensor.h>

#include <cstring>

using namespace brisk;

// (A macro: GTEST_SKIP returns from the function it is written in.)
#define SKIP_UNLESS_CACHING()                                                                               \
  do {                                                                                                      \
    if (!cpu_allocator_stats().caching) GTEST_SKIP() << "the CPU allocator's cache is off in this process"; \
  } while (0)

TEST(CpuAllocator, AFreedBlockServesTheNextRequestOfItsSize) {
  SKIP_UNLESS_CACHING();
  Allocator* a = cpu_allocator();
  void* p = a->allocate(3 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 1, 3 << 20);
  a->deallocate(p, 3 << 20);
  const CpuAllocatorStats before = cpu_allocator_stats();
  EXPECT_GE(before.cached_bytes, 3 << 20);
  void* q = a->allocate(3 << 20);
  const CpuAllocatorStats after = cpu_allocator_stats();
  EXPECT_EQ(q, p);
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  a->deallocate(q, 3 << 20);
}

TEST(CpuAllocator, ABlockServesRequestsUpToAnEighthSmallerButNotMuchSmaller) {
  SKIP_UNLESS_CACHING();
  cpu_empty_cache();
  Allocator* a = cpu_allocator();
  const size_t big = 8 << 20;
  void* p = a->allocate(big);
  a->deallocate(p, big);
  void* slightly_smaller = a->allocate(big - big / 16);  // 1/16 smaller: reuses the block
  EXPECT_EQ(slightly_smaller, p);
  a->deallocate(slightly_smaller, big - big / 16);  // freed by the tensor's size: the block keeps its own
  const int64_t sys = cpu_allocator_stats().system_allocs;
  void* half = a->allocate(big / 2);  // would waste half the block: a new one
  EXPECT_NE(half, p);
  EXPECT_EQ(cpu_allocator_stats().system_allocs, sys + 1);
  void* again = a->allocate(big);  // the first block is still cached, whole
  EXPECT_EQ(again, p);
  a->deallocate(half, big / 2);
  a->deallocate(again, big);
}

TEST(CpuAllocator, EmptyCacheReturnsEveryFreeBlock) {
  SKIP_UNLESS_CACHING();
  Allocator* a = cpu_allocator();
  void* p = a->allocate(1 << 20);
  a->deallocate(p, 1 << 20);
  ASSERT_GT(cpu_allocator_stats().cached_blocks, 0);
  const int64_t frees = cpu_allocator_stats().system_frees;
  const int64_t blocks = cpu_allocator_stats().cached_blocks;
  cpu_empty_cache();
  const CpuAllocatorStats s = cpu_allocator_stats();
  EXPECT_EQ(s.cached_blocks, 0);
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_EQ(s.system_frees, frees + blocks);
}

TEST(CpuAllocator, TensorsOfARepeatedShapeComeFromTheCache) {
  SKIP_UNLESS_CACHING();
  { Tensor warm = empty({512, 1024}, DType::F32); }
  const int64_t sys = cpu_allocator_stats().system_allocs;
  for (int i = 0; i < 10; ++i) {
    Tensor t = empty({512, 1024}, DType::F32);
    t.data<float>()[0] = 1.0f;
  }
  EXPECT_EQ(cpu_allocator_stats().system_allocs, sys);
}
