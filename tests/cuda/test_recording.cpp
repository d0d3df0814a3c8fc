// The CUDA runtime layer's host-side logic, run without a GPU in recording mode: the caching
// allocator (per-stream free lists, no cudaMalloc in a steady state, peaks, empty_cache), streams
// and events (what is enqueued where), copies (which wait and which do not), launch-shape checks,
// and errors that name the op. Skips in a CPU-only build.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/dispatch.h>
#include <brisk/kernels/elementwise.h>

#include "common/errors.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using cuda::recording::Kind;

TEST(Recording, PretendsAGpuExistsOnlyWhileASessionIsAlive) {
  SKIP_WITHOUT_RECORDING();
  const int real = cuda::device_count();
  {
    cuda::recording::Session rec(2);
    EXPECT_TRUE(cuda::recording::active());
    EXPECT_EQ(cuda::device_count(), 2);
    EXPECT_TRUE(cuda::is_available());
    EXPECT_THROW(cuda::recording::Session second, Error) << "one session at a time";
  }
  EXPECT_FALSE(cuda::recording::active());
  EXPECT_EQ(cuda::device_count(), real);
}

TEST(Recording, AllocatorServesASteadyStateLoopWithoutCudaMalloc) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  cuda::empty_cache();
  const cuda::AllocatorStats start = cuda::allocator_stats(0);
  auto step = [] {
    Tensor a = empty({1000}, DType::F32, cuda_device()), b = empty({64, 64}, DType::F16, cuda_device());
    Tensor c = empty({3 << 20}, DType::F32, cuda_device());  // a large block (> 1 MiB)
    return a.nbytes() + b.nbytes() + c.nbytes();
  };
  step();  // warm-up: the first step allocates
  const cuda::AllocatorStats warm = cuda::allocator_stats(0);
  EXPECT_EQ(warm.device_allocs - start.device_allocs, 3);
  EXPECT_EQ(warm.allocated_bytes, start.allocated_bytes) << "everything freed again";
  EXPECT_EQ(warm.cached_blocks, start.cached_blocks + 3);
  rec.clear();
  for (int i = 0; i < 20; ++i) step();
  const cuda::AllocatorStats steady = cuda::allocator_stats(0);
  EXPECT_EQ(steady.device_allocs, warm.device_allocs) << "no cudaMalloc in the steady state";
  EXPECT_EQ(steady.cache_hits, warm.cache_hits + 60);
  EXPECT_EQ(rec.count(Kind::Malloc), 0u);
  EXPECT_GE(steady.peak_allocated_bytes, steady.allocated_bytes + (int64_t{3} << 22));
  cuda::empty_cache();
  const cuda::AllocatorStats emptied = cuda::allocator_stats(0);
  EXPECT_EQ(emptied.cached_blocks, 0);
  EXPECT_EQ(emptied.reserved_bytes, emptied.allocated_bytes);
  EXPECT_EQ(emptied.device_frees - steady.device_frees, steady.cached_blocks);
}

TEST(Recording, BlocksAreReusedOnlyOnTheStreamTheyWereMadeOn) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  cuda::empty_cache();
  void* first = nullptr;
  { first = empty({256}, DType::F32, cuda_device()).data_ptr(); }
  cuda::Stream side = cuda::Stream::create();
  const int64_t allocs = cuda::allocator_stats(0).device_allocs;
  {
    cuda::StreamGuard g(side);
    Tensor t = empty({256}, DType::F32, cuda_device());
    EXPECT_NE(t.data_ptr(), first) << "a block freed on the default stream is not handed to another stream";
  }
  EXPECT_EQ(cuda::allocator_stats(0).device_allocs, allocs + 1);
  Tensor again = empty({256}, DType::F32, cuda_device());
  EXPECT_EQ(again.data_ptr(), first) << "but comes back on its own stream";
}

TEST(Recording, StreamsAndEventsAreLoggedInOrder) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  cuda::Stream comm = cuda::Stream::create();
  EXPECT_EQ(cuda::current_stream().handle(), nullptr) << "the default stream until set";
  cuda::Event ready;
  ready.record();    // on the current (default) stream
  ready.wait(comm);  // comm waits for it
  {
    cuda::StreamGuard g(comm);
    EXPECT_EQ(cuda::current_stream(), comm);
    Tensor x = empty({10}, DType::F32, cuda_device());
    kernels::fill_(x, 1.0);  // launches on comm
  }
  EXPECT_EQ(cuda::current_stream().handle(), nullptr) << "the guard restored the default stream";
  auto log = rec.entries();
  ASSERT_GE(log.size(), 3u);
  const uint64_t comm_id = cuda::recording::stream_id(comm.handle());
  EXPECT_NE(comm_id, 0u);
  size_t i = 0;
  while (i < log.size() && log[i].kind != Kind::EventRecord) ++i;
  ASSERT_LT(i + 2, log.size());
  EXPECT_EQ(log[i].stream, 0u);
  EXPECT_EQ(log[i + 1].kind, Kind::EventWait);
  EXPECT_EQ(log[i + 1].stream, comm_id);
  EXPECT_EQ(log[i + 1].event, log[i].event);
  bool launched_on_comm = false;
  for (const auto& e : log) launched_on_comm |= e.kind == Kind::Launch && e.name == "fill" && e.stream == comm_id;
  EXPECT_TRUE(launched_on_comm);
}

TEST(Recording, CopiesToTheHostWaitAndPinnedNonBlockingCopiesDoNot) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  Tensor host = arange(0.0, 100.0, 1.0, {.dtype = DType::F32});
  Tensor dev = kernels::to_device(host, cuda_device());
  EXPECT_EQ(rec.count(Kind::Copy), 1u);
  EXPECT_EQ(rec.count(Kind::Sync), 1u) << "a blocking upload from pageable memory waits";
  EXPECT_EQ(dev.to_vector<float>(), host.to_vector<float>()) << "recording copies the bytes";
  rec.clear();
  Tensor pinned = cuda::pin_memory(host);
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_FALSE(host.is_pinned());
  Tensor dev2 = kernels::to_device(pinned, cuda_device(), /*non_blocking=*/true);
  EXPECT_EQ(rec.count(Kind::Copy), 1u);
  EXPECT_EQ(rec.count(Kind::Sync), 0u) << "a non-blocking copy from pinned memory is only enqueued";
  rec.clear();
  Tensor a = empty({100}, DType::F32, cuda_device());
  kernels::copy_(a, dev);
  EXPECT_EQ(rec.count(Kind::Copy), 1u);
  EXPECT_EQ(rec.count(Kind::Sync), 0u) << "a device-to-device copy is stream ordered";
}

TEST(Recording, LaunchShapesAreCheckedOnTheHost) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  Tensor x = empty({3, 1000}, DType::F16, cuda_device());
  kernels::fill_(x, 2.0);
  auto launches = rec.entries(Kind::Launch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].name, "fill");
  EXPECT_GE(static_cast<int64_t>(launches[0].grid[0]) * launches[0].block[0] * 8, 3000)
      << "enough threads for every vector of 8 halves";
  // The fill of a transposed view goes through the strided kernel.
  rec.clear();
  kernels::fill_(x.as_strided({1000, 3}, {1, 1000}, 0), 1.0);
  EXPECT_EQ(rec.count(Kind::Launch), 1u);
}

TEST(Recording, ErrorsNameTheOpAndShapes) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  Tensor x = empty({2, 3}, DType::F32, cuda_device());
  kernels::OpScope scope("my_op", &x);
  const std::string ctx = kernels::OpScope::describe();
  EXPECT_NE(ctx.find("my_op"), std::string::npos) << ctx;
  EXPECT_NE(ctx.find("[2, 3] f32 cuda:0"), std::string::npos) << ctx;
}

TEST(Recording, DevicesOtherThanTheFirstAreAddressable) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec(2);
  Tensor x = kernels::to_device(ones({4}), cuda_device(1));
  EXPECT_EQ(x.device(), cuda_device(1));
  EXPECT_EQ(cuda::allocator_stats(1).allocated_bytes, 512) << "counted on device 1 (one 512-byte block)";
  Tensor y = kernels::to_device(x, cuda_device(0));
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, 1.0f));
  brisk::testing::expect_error([] { empty({4}, DType::F32, cuda_device(2)); }, "cuda:2");
}
