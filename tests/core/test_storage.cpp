// Storage and allocators: 64-byte alignment, per-category memory counters with peaks,
// release()/allocate_again(), and what a tensor over released bytes does.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <brisk/core/allocator.h>
#include <brisk/core/storage.h>
#include <brisk/core/tensor.h>

using namespace brisk;

namespace {
int64_t current(MemoryCategory c) {
  return memory_stats().current[static_cast<int>(c)];
}
int64_t peak(MemoryCategory c) {
  return memory_stats().peak[static_cast<int>(c)];
}
}  // namespace

TEST(Allocator, CpuBlocksAre64ByteAligned) {
  Allocator* a = cpu_allocator();
  EXPECT_EQ(a->device(), kCPU);
  for (size_t n : {1u, 3u, 63u, 64u, 65u, 1000u, 4097u}) {
    void* p = a->allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n << " bytes";
    a->deallocate(p, n);
  }
  EXPECT_EQ(a->allocate(0), nullptr);
  for (int64_t n : {1, 7, 33, 1000}) {
    Tensor t = empty({n}, DType::U8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << n;
  }
}

TEST(Allocator, CpuDeviceHasTheCpuAllocator) {
  EXPECT_EQ(allocator_for(kCPU), cpu_allocator());
}

TEST(MemoryStats, CountsBytesPerCategoryWithPeaks) {
  const auto cat = MemoryCategory::OptimizerState;
  const int64_t base = current(cat);
  const int64_t base_total = memory_stats().total_current;
  reset_peak_memory_stats();
  EXPECT_EQ(peak(cat), base);
  {
    Storage a = make_storage(1000, kCPU, cat);
    EXPECT_EQ(current(cat), base + 1000);  // the requested bytes, not the rounded block
    EXPECT_EQ(memory_stats().total_current, base_total + 1000);
    {
      Storage b = make_storage(500, kCPU, cat);
      EXPECT_EQ(current(cat), base + 1500);
    }
    EXPECT_EQ(current(cat), base + 1000);
    EXPECT_EQ(peak(cat), base + 1500);
    EXPECT_GE(memory_stats().total_peak, base_total + 1500);
    reset_peak_memory_stats();
    EXPECT_EQ(peak(cat), base + 1000);  // the peak restarts from what is held now
  }
  EXPECT_EQ(current(cat), base);
  EXPECT_EQ(memory_stats().total_current, base_total);
}

TEST(MemoryStats, SetCategoryMovesTheBytes) {
  const int64_t act = current(MemoryCategory::Activations), grads = current(MemoryCategory::Gradients);
  Storage s = make_storage(256, kCPU, MemoryCategory::Activations);
  EXPECT_EQ(current(MemoryCategory::Activations), act + 256);
  s->set_category(MemoryCategory::Gradients);
  EXPECT_EQ(s->category(), MemoryCategory::Gradients);
  EXPECT_EQ(current(MemoryCategory::Activations), act);
  EXPECT_EQ(current(MemoryCategory::Gradients), grads + 256);
  s.reset();
  EXPECT_EQ(current(MemoryCategory::Gradients), grads);
}

TEST(MemoryStats, MemoryCategoryGuardSetsTheCategoryOfNewTensors) {
  EXPECT_EQ(current_memory_category(), MemoryCategory::Other);
  const int64_t params = current(MemoryCategory::Parameters);
  {
    MemoryCategoryGuard g(MemoryCategory::Parameters);
    EXPECT_EQ(current_memory_category(), MemoryCategory::Parameters);
    Tensor w = empty({4, 8}, DType::F32);
    EXPECT_EQ(w.storage()->category(), MemoryCategory::Parameters);
    EXPECT_EQ(current(MemoryCategory::Parameters), params + 128);
    {
      MemoryCategoryGuard inner(MemoryCategory::Gradients);
      EXPECT_EQ(empty({2}).storage()->category(), MemoryCategory::Gradients);
    }
    EXPECT_EQ(current_memory_category(), MemoryCategory::Parameters);  // guards nest
  }
  EXPECT_EQ(current_memory_category(), MemoryCategory::Other);
  EXPECT_EQ(current(MemoryCategory::Parameters), params);
}

TEST(MemoryStats, ReportNamesEveryCategory) {
  std::string r = memory_report();
  for (const char* name : {"parameters", "gradients", "optimizer_state", "activations", "other", "total"})
    EXPECT_NE(r.find(name), std::string::npos) << r;
  EXPECT_NE(r.find("MiB"), std::string::npos) << r;
}

TEST(Storage, ReleaseFreesBytesButKeepsTheSize) {
  const auto cat = MemoryCategory::Other;
  const int64_t base = current(cat);
  Storage s = make_storage(4096, kCPU, cat);
  EXPECT_TRUE(s->is_allocated());
  EXPECT_EQ(current(cat), base + 4096);
  s->release();
  EXPECT_FALSE(s->is_allocated());
  EXPECT_EQ(s->data(), nullptr);
  EXPECT_EQ(s->nbytes(), 4096u);
  EXPECT_EQ(current(cat), base);
  s->release();  // idempotent
  EXPECT_EQ(current(cat), base);
  s->allocate_again();
  EXPECT_TRUE(s->is_allocated());
  EXPECT_NE(s->data(), nullptr);
  EXPECT_EQ(s->nbytes(), 4096u);
  EXPECT_EQ(current(cat), base + 4096);
  s->allocate_again();  // no-op when already allocated
  EXPECT_EQ(current(cat), base + 4096);
  s->release();
  s.reset();  // destroying a released storage does not count the bytes twice
  EXPECT_EQ(current(cat), base);
}

TEST(Storage, SetCategoryWhileReleasedCountsOnReallocation) {
  const int64_t grads = current(MemoryCategory::Gradients), other = current(MemoryCategory::Other);
  Storage s = make_storage(64, kCPU, MemoryCategory::Other);
  s->release();
  s->set_category(MemoryCategory::Gradients);
  EXPECT_EQ(current(MemoryCategory::Other), other);
  EXPECT_EQ(current(MemoryCategory::Gradients), grads);
  s->allocate_again();
  EXPECT_EQ(current(MemoryCategory::Gradients), grads + 64);
}

TEST(Storage, EmptyStorageIsAlwaysAllocated) {
  Storage s = make_storage(0, kCPU);
  EXPECT_TRUE(s->is_allocated());
  s->release();
  EXPECT_TRUE(s->is_allocated());
}

TEST(Storage, ReadingATensorOverReleasedBytesThrowsAClearError) {
  Tensor t = from_vector<float>({1.f, 2.f, 3.f}, {3});
  t.storage()->release();
  try {
    t.to_vector<float>();
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("released"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allocate_again"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.as_strided({}, {}, 1).item<float>(), Error);
}

TEST(Storage, PrintingATensorOverReleasedBytesSaysSoInsteadOfReading) {
  Tensor t = from_vector<float>({1.f, 2.f}, {2});
  t.storage()->release();
  std::string s = to_string(t);
  EXPECT_NE(s.find("released"), std::string::npos) << s;
  EXPECT_NE(s.find("shape=[2]"), std::string::npos) << s;
  t.storage()->allocate_again();
  std::memset(t.data_ptr(), 0, t.nbytes());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0.f, 0.f}));  // readable again
}
