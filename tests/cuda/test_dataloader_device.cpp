// The DataLoader's pinned memory and GPU placement, checked in recording mode: each batch is
// copied to the GPU on a side stream ahead of use, the consumer's stream waits for that copy's
// event before the batch is handed out, copies from pinned memory leave the host free, and the
// values that arrive are the batch's (recording mode copies real bytes).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>

#include <set>
#include <vector>
#include "cuda/gpu_skip.h"

using namespace brisk;
using namespace brisk::data;
namespace rec = brisk::cuda::recording;
using rec::Kind;

namespace {

// data[i] = (i, 10 i) as f32, target[i] = i.
std::shared_ptr<TensorDataset> numbers(int64_t n) {
  std::vector<float> d;
  for (int64_t i = 0; i < n; ++i) {
    d.push_back(static_cast<float>(i));
    d.push_back(static_cast<float>(10 * i));
  }
  return std::make_shared<TensorDataset>(from_vector<float>(d, {n, 2}), arange(n));
}

std::vector<rec::Entry> on_stream(const std::vector<rec::Entry>& log, Kind kind, uint64_t stream) {
  std::vector<rec::Entry> out;
  for (const rec::Entry& e : log)
    if (e.kind == kind && e.stream == stream) out.push_back(e);
  return out;
}

// The stream the loader copies on: the one the first recorded event belongs to (not the default).
uint64_t copy_stream_of(const std::vector<rec::Entry>& log) {
  for (const rec::Entry& e : log)
    if (e.kind == Kind::EventRecord) return e.stream;
  return 0;
}

}  // namespace

TEST(DataLoaderOnGpu, BatchesAreCopiedAheadOnASideStreamAndTheConsumerWaitsForThem) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  DataLoader loader(numbers(10), {.batch_size = 4, .pin_memory = true, .device = cuda_device(0)});
  const int64_t batches = loader.size();  // 4, 4, 2
  int64_t k = 0;
  for (auto& [x, y] : loader) {
    const std::vector<rec::Entry> log = session.entries();  // as the consumer gets batch k
    ASSERT_EQ(x.device(), cuda_device(0));
    ASSERT_EQ(y.device(), cuda_device(0));
    const uint64_t side = copy_stream_of(log);
    ASSERT_NE(side, 0u) << "copies must run on a side stream, not the consumer's (default) stream";

    // The consumer's stream (the default one here) has waited, on the device, for batch k's copy.
    std::vector<rec::Entry> waits = on_stream(log, Kind::EventWait, 0);
    std::vector<rec::Entry> records = on_stream(log, Kind::EventRecord, side);
    ASSERT_EQ(static_cast<int64_t>(waits.size()), k + 1);
    EXPECT_EQ(waits[static_cast<size_t>(k)].event, records[static_cast<size_t>(k)].event);

    // That event was recorded right after the batch's two host-to-device copies on the side stream.
    size_t copies = 0, seen_records = 0;
    for (const rec::Entry& e : log) {
      if (e.stream != side) continue;
      if (e.kind == Kind::EventRecord && seen_records++ == static_cast<size_t>(k)) break;
      if (e.kind == Kind::Copy && seen_records == static_cast<size_t>(k)) ++copies;
    }
    EXPECT_EQ(copies, 2u) << "batch " << k << ": data and target";
    // Copies from pinned memory are left in flight: the host never waited for the side stream.
    EXPECT_TRUE(on_stream(log, Kind::Sync, side).empty());
    // One batch ahead: the next batch's copy was started before this one was handed out.
    EXPECT_EQ(static_cast<int64_t>(records.size()), std::min(k + 2, batches)) << "batch " << k;

    // The values that arrived are batch k's.
    std::vector<int64_t> targets = y.to_vector<int64_t>();
    std::vector<float> data = x.to_vector<float>();
    for (size_t i = 0; i < targets.size(); ++i) {
      EXPECT_EQ(targets[i], 4 * k + static_cast<int64_t>(i));
      EXPECT_EQ(data[2 * i + 1], 10.0f * static_cast<float>(targets[i]));
    }
    ++k;
  }
  EXPECT_EQ(k, batches);
}

TEST(DataLoaderOnGpu, WorkersCopyTheirBatchesAndEveryBatchIsWaitedFor) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  DataLoader loader(numbers(22),
                    {.batch_size = 3, .shuffle = true, .num_workers = 2, .pin_memory = true, .device = cuda_device(0)});
  std::vector<int64_t> expected;
  for (const auto& b : loader.batch_indices(0)) expected.insert(expected.end(), b.begin(), b.end());
  std::vector<int64_t> seen;
  std::set<uint64_t> waited;
  for (auto& [x, y] : loader) {
    ASSERT_EQ(x.device(), cuda_device(0));
    const std::vector<rec::Entry> waits = on_stream(session.entries(), Kind::EventWait, 0);
    ASSERT_FALSE(waits.empty());
    EXPECT_TRUE(waited.insert(waits.back().event).second) << "each batch waits for its own copy";
    for (int64_t t : y.to_vector<int64_t>()) seen.push_back(t);
  }
  EXPECT_EQ(seen, expected) << "same batches, same order as without a GPU";
  const std::vector<rec::Entry> log = session.entries();
  const uint64_t side = copy_stream_of(log);
  ASSERT_NE(side, 0u);
  EXPECT_EQ(on_stream(log, Kind::EventRecord, side).size(), waited.size());
  for (const rec::Entry& e : on_stream(log, Kind::EventRecord, side)) EXPECT_TRUE(waited.count(e.event));
}

TEST(DataLoaderOnGpu, TheConsumersCurrentStreamIsTheOneThatWaits) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  cuda::Stream compute = cuda::Stream::create(0);
  cuda::StreamGuard guard(compute);
  DataLoader loader(numbers(4), {.batch_size = 2, .device = cuda_device(0)});
  for (auto& b : loader) (void)b;
  const uint64_t id = rec::stream_id(compute.handle());
  EXPECT_EQ(on_stream(session.entries(), Kind::EventWait, id).size(), 2u);
  EXPECT_TRUE(on_stream(session.entries(), Kind::EventWait, 0).empty());
}

TEST(DataLoaderOnGpu, WithoutPinnedMemoryTheCopiesAreStillOrderedByTheEvent) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  DataLoader loader(numbers(4), {.batch_size = 2, .device = cuda_device(0)});
  int64_t n = 0;
  for (auto& [x, y] : loader) n += y.numel();
  EXPECT_EQ(n, 4);
  const std::vector<rec::Entry> log = session.entries();
  EXPECT_EQ(on_stream(log, Kind::EventWait, 0).size(), 2u);
  // From pageable memory the driver stages the bytes before returning: the copy waits.
  EXPECT_FALSE(on_stream(log, Kind::Sync, copy_stream_of(log)).empty());
}

TEST(DataLoaderOnGpu, PinnedBatchesStayOnTheCpuWithoutADevice) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  DataLoader loader(numbers(6), {.batch_size = 4, .num_workers = 1, .pin_memory = true});
  int64_t n = 0;
  for (auto& [x, y] : loader) {
    EXPECT_TRUE(x.device().is_cpu());
    EXPECT_TRUE(x.is_pinned());
    EXPECT_TRUE(y.is_pinned());
    n += y.numel();
  }
  EXPECT_EQ(n, 6);
  EXPECT_EQ(session.count(Kind::Copy), 0u);
}

TEST(DataLoaderOnGpu, AnIterableDatasetIsPlacedToo) {
  SKIP_WITHOUT_RECORDING();
  struct Count : IterableDataset {
    int64_t i = 0;
    std::optional<Example> next() override {
      if (i == 5) return std::nullopt;
      const float v = static_cast<float>(i++);
      return Example{from_vector<float>({v}, {1}), Tensor()};
    }
    void reset(uint64_t) override { i = 0; }
  };
  rec::Session session;
  DataLoader loader(std::make_shared<Count>(), {.batch_size = 2, .pin_memory = true, .device = cuda_device(0)});
  std::vector<float> seen;
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.device(), cuda_device(0));
    EXPECT_FALSE(y.defined());
    for (float v : x.to_vector<float>()) seen.push_back(v);
  }
  EXPECT_EQ(seen, (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(on_stream(session.entries(), Kind::EventWait, 0).size(), 3u);
}

TEST(DataLoaderOnGpu, AWorkersFailureIsStillRethrownAtItsBatch) {
  SKIP_WITHOUT_RECORDING();
  struct Failing : Dataset {
    int64_t size() const override { return 8; }
    Example get(int64_t i) const override {
      BRISK_CHECK(i != 5, "bad sample ", i);
      return Example{full({1}, static_cast<double>(i)), Tensor()};
    }
  };
  rec::Session session;
  for (int64_t workers : {0, 2}) {
    DataLoader loader(std::make_shared<Failing>(), {.batch_size = 2, .num_workers = workers, .device = cuda_device(0)});
    int64_t reached = 0;
    try {
      for (auto& b : loader) {
        (void)b;
        ++reached;
      }
      FAIL() << "expected the failure of sample 5";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bad sample 5"), std::string::npos) << e.what();
    }
    EXPECT_EQ(reached, 2) << "batches 0 and 1 come out before batch 2 fails (workers " << workers << ")";
  }
}
