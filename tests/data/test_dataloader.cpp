// DataLoader: batching, len, epochs and reshuffling, ordered prefetch with worker threads
// (identical results for any worker count, bounded look-ahead), worker errors re-thrown
// at their batch, early break, iterable datasets, the batch-source hook and resuming.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace brisk;
using namespace brisk::data;
using V = std::vector<int64_t>;

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

V targets_of(DataLoader& loader) {
  V out;
  for (auto& [x, y] : loader) {
    auto t = y.to_vector<int64_t>();
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

std::vector<V> batches_of(DataLoader& loader) {
  std::vector<V> out;
  for (auto& b : loader) out.push_back(b.target.to_vector<int64_t>());
  return out;
}

// A dataset using the default get_batch (stacking get(i)), optionally slow or failing.
class SlowDataset : public Dataset {
 public:
  explicit SlowDataset(int64_t n, int64_t fail_at = -1, int sleep_us = 0)
      : n_(n), fail_at_(fail_at), sleep_us_(sleep_us) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    ++calls;
    if (sleep_us_) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    if (i == fail_at_) throw std::runtime_error("sample " + std::to_string(i) + " is corrupt");
    return Example{full({3}, static_cast<double>(i)), tensor<int64_t>({i}).view({})};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_, fail_at_;
  int sleep_us_;
};

}  // namespace

TEST(DataLoader, YieldsBatchesInOrderWithStructuredBindings) {
  DataLoader loader(numbers(7), {.batch_size = 3});
  std::vector<V> seen;
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.dtype(), DType::F32);
    EXPECT_EQ(x.size(1), 2);
    EXPECT_EQ(x.size(0), y.size(0));
    auto xv = x.to_vector<float>();
    auto yv = y.to_vector<int64_t>();
    for (size_t k = 0; k < yv.size(); ++k) EXPECT_EQ(xv[2 * k + 1], 10.0f * yv[k]);
    seen.push_back(yv);
  }
  EXPECT_EQ(seen, (std::vector<V>{{0, 1, 2}, {3, 4, 5}, {6}}));
}

TEST(DataLoader, SizeIsTheNumberOfBatchesWithAndWithoutDropLast) {
  EXPECT_EQ(DataLoader(numbers(10), {.batch_size = 3}).size(), 4);
  EXPECT_EQ(DataLoader(numbers(10), {.batch_size = 3, .drop_last = true}).size(), 3);
  EXPECT_EQ(DataLoader(numbers(9), {.batch_size = 3, .drop_last = true}).size(), 3);
  DataLoader dl(numbers(10), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(batches_of(dl).size(), 3u);
  EXPECT_EQ(batches_of(dl).back(), (V{6, 7, 8}));
}

TEST(DataLoader, TakesADatasetByValue) {
  TensorDataset ds(zeros({4, 2}), arange(4));
  DataLoader loader(ds, {.batch_size = 2});
  EXPECT_EQ(loader.size(), 2);
  EXPECT_EQ(targets_of(loader), (V{0, 1, 2, 3}));
}

TEST(DataLoader, ShuffleReseedsEachEpochAutomatically) {
  DataLoader loader(numbers(12), {.batch_size = 4, .shuffle = true, .seed = 3});
  V e0 = targets_of(loader);
  EXPECT_EQ(loader.epoch(), 0u);
  V e1 = targets_of(loader);
  EXPECT_EQ(loader.epoch(), 1u);
  Generator g0(3), g1(4);
  EXPECT_EQ(e0, randperm(12, &g0).to_vector<int64_t>());
  EXPECT_EQ(e1, randperm(12, &g1).to_vector<int64_t>());
  EXPECT_NE(e0, e1);
}

TEST(DataLoader, SetEpochPinsTheNextIterationsOrder) {
  DataLoader a(numbers(12), {.batch_size = 5, .shuffle = true});
  DataLoader b(numbers(12), {.batch_size = 5, .shuffle = true});
  a.set_epoch(5);
  EXPECT_EQ(batches_of(a), b.batch_indices(5));
  a.set_epoch(5);
  EXPECT_EQ(batches_of(a), b.batch_indices(5));  // set again: same epoch again
  EXPECT_EQ(batches_of(a), b.batch_indices(6));  // not set: counts on
}

TEST(DataLoader, BatchIndicesShowThePlan) {
  DataLoader loader(numbers(5), {.batch_size = 2});
  EXPECT_EQ(loader.batch_indices(0), (BatchPlan{{0, 1}, {2, 3}, {4}}));
}

TEST(DataLoader, SameBatchesForZeroOneAndThreeWorkers) {
  for (bool shuffle : {false, true}) {
    std::vector<std::vector<float>> ref;
    for (int64_t workers : {0, 1, 3}) {
      DataLoader loader(numbers(50), {.batch_size = 4, .shuffle = shuffle, .num_workers = workers, .seed = 11});
      std::vector<std::vector<float>> got;
      for (int epoch = 0; epoch < 2; ++epoch)
        for (auto& [x, y] : loader) got.push_back(x.to_vector<float>());
      if (workers == 0)
        ref = got;
      else
        EXPECT_EQ(got, ref) << "num_workers " << workers << " shuffle " << shuffle;
    }
  }
}

TEST(DataLoader, WorkersKeepOrderWhenBatchesFinishOutOfOrder) {
  // Default get_batch (per-sample get) with a delay: workers finish in any order.
  auto ds = std::make_shared<SlowDataset>(40, -1, 200);
  DataLoader loader(ds, {.batch_size = 3, .num_workers = 3, .prefetch_factor = 3});
  V expect(40);
  for (int64_t i = 0; i < 40; ++i) expect[static_cast<size_t>(i)] = i;
  EXPECT_EQ(targets_of(loader), expect);
}

TEST(DataLoader, PrefetchLooksAtMostWorkersTimesFactorBatchesAhead) {
  auto ds = std::make_shared<SlowDataset>(60);
  DataLoader loader(ds, {.batch_size = 1, .num_workers = 2, .prefetch_factor = 2});
  int64_t k = 0;
  for (auto it = loader.begin(); it != loader.end(); ++it, ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let workers run ahead
    EXPECT_LE(ds->calls.load(), k + 1 + 4) << "at batch " << k;
    EXPECT_EQ(it.index(), k);
  }
  EXPECT_EQ(k, 60);
}

TEST(DataLoader, WorkerExceptionIsRethrownAtItsBatchWithItsMessage) {
  for (int64_t workers : {0, 1, 3}) {
    auto ds = std::make_shared<SlowDataset>(30, /*fail_at=*/13);
    DataLoader loader(ds, {.batch_size = 4, .num_workers = workers});
    int64_t received = 0;
    try {
      for (auto& b : loader) {
        (void)b;
        ++received;
      }
      FAIL() << "expected the dataset's error";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "sample 13 is corrupt");
    }
    EXPECT_EQ(received, 3) << "num_workers " << workers;  // batches 0..2; batch 3 holds sample 13
  }
}

TEST(DataLoader, EarlyBreakWithWorkersJoinsCleanly) {
  auto ds = std::make_shared<SlowDataset>(2000, -1, 50);
  DataLoader loader(ds, {.batch_size = 2, .num_workers = 4, .prefetch_factor = 4});
  for (int round = 0; round < 3; ++round) {
    int n = 0;
    for (auto& b : loader) {
      (void)b;
      if (++n == 2) break;
    }
    EXPECT_EQ(n, 2);
  }
  // Workers never ran far: 3 rounds of at most (2 + 16) batches of 2 samples.
  EXPECT_LE(ds->calls.load(), 3 * (2 + 16) * 2);
}

TEST(DataLoader, IteratorMayOutliveTheLoader) {
  DataLoader::Iterator it;
  {
    DataLoader loader(numbers(8), {.batch_size = 2, .num_workers = 2});
    it = loader.begin();
  }
  V got;
  for (; it != std::default_sentinel; ++it) {
    auto t = it->target.to_vector<int64_t>();
    got.insert(got.end(), t.begin(), t.end());
  }
  EXPECT_EQ(got, (V{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoader, UsesAGivenSampler) {
  auto sampler = std::make_shared<DistributedSampler>(10, 2, 1, /*shuffle=*/false);
  DataLoader loader(numbers(10), {.batch_size = 2, .sampler = sampler});
  EXPECT_EQ(loader.size(), 3);
  EXPECT_EQ(targets_of(loader), (V{1, 3, 5, 7, 9}));
  EXPECT_THROW(DataLoader(numbers(10), {.shuffle = true, .sampler = sampler}), Error);
}

TEST(DataLoader, BatchSourceReplacesThePlan) {
  // Accelerate's sharding: rank 1 of 2 takes global batches 1, 3, 5, ...
  DataLoader loader(numbers(12), {.batch_size = 2});
  loader.set_batch_source([&loader](uint64_t epoch) {
    BatchPlan all = loader.default_batch_indices(epoch), mine;
    for (size_t b = 1; b < all.size(); b += 2) mine.push_back(all[b]);
    return mine;
  });
  EXPECT_EQ(loader.size(), 3);
  EXPECT_EQ(batches_of(loader), (std::vector<V>{{2, 3}, {6, 7}, {10, 11}}));
}

TEST(DataLoader, StartBatchResumesMidEpochOnce) {
  DataLoader loader(numbers(10), {.batch_size = 2, .shuffle = true, .num_workers = 2, .seed = 1});
  loader.set_epoch(3);
  loader.set_start_batch(2);
  std::vector<V> resumed = batches_of(loader);
  BatchPlan plan = loader.batch_indices(3);
  EXPECT_EQ(resumed, std::vector<V>(plan.begin() + 2, plan.end()));
  EXPECT_EQ(loader.position(), 5);
  EXPECT_EQ(batches_of(loader).size(), 5u);  // the next epoch starts from its beginning
}

TEST(DataLoader, PositionCountsBatchesHandedOut) {
  DataLoader loader(numbers(10), {.batch_size = 3});
  int64_t k = 0;
  for (auto& b : loader) {
    (void)b;
    EXPECT_EQ(loader.position(), ++k);
  }
}

// What a checkpoint records: where the program goes on from here. A loop cut short leaves its
// epoch behind (the next loop starts the next epoch); a loop still running goes on with its own.
TEST(DataLoader, NextBatchIsTheRunningIterationsOrTheNextLoopsWhateverTheLoopDid) {
  DataLoader loader(numbers(10), {.batch_size = 2, .shuffle = true, .seed = 1});
  EXPECT_EQ(loader.next_batch().epoch, 0u);  // before any loop: the first epoch, from its start
  EXPECT_EQ(loader.next_batch().batch, 0);
  int64_t seen = 0;
  for (auto& b : loader) {
    (void)b;
    ++seen;
    EXPECT_EQ(loader.next_batch().epoch, 0u) << "mid-loop: this epoch";
    EXPECT_EQ(loader.next_batch().batch, seen) << "mid-loop: the batch after the one handed out";
    if (seen == 2) break;
  }
  EXPECT_EQ(loader.next_batch().epoch, 1u) << "after a break the next loop starts epoch 1";
  EXPECT_EQ(loader.next_batch().batch, 0);
  for (auto& b : loader) (void)b;  // epoch 1, whole
  EXPECT_EQ(loader.next_batch().epoch, 2u);
  EXPECT_EQ(loader.next_batch().batch, 0);
  loader.set_epoch(7);
  loader.set_start_batch(3);
  EXPECT_EQ(loader.next_batch().epoch, 7u) << "a pinned epoch and start batch are what comes next";
  EXPECT_EQ(loader.next_batch().batch, 3);
}

TEST(DataLoader, RejectsBadOptions) {
  EXPECT_THROW(DataLoader(numbers(4), {.batch_size = 0}), Error);
  EXPECT_THROW(DataLoader(numbers(4), {.num_workers = -1}), Error);
  EXPECT_THROW(DataLoader(numbers(4), {.prefetch_factor = 0}), Error);
}

namespace {

// 0, 1, ..., n-1 as a stream; remembers the epoch it was reset for.
class Counter : public IterableDataset {
 public:
  explicit Counter(int64_t n) : n_(n) {}
  std::optional<Example> next() override {
    if (i_ >= n_) return std::nullopt;
    const int64_t v = i_++;
    return Example{full({2}, static_cast<double>(v)),
                   tensor<int64_t>({v + 100 * static_cast<int64_t>(epoch)}).view({})};
  }
  void reset(uint64_t e) override {
    epoch = e;
    i_ = 0;
  }
  uint64_t epoch = 99;

 private:
  int64_t n_, i_ = 0;
};

}  // namespace

TEST(DataLoader, BatchesAnIterableDatasetStream) {
  auto stream = std::make_shared<Counter>(10);
  DataLoader loader(stream, {.batch_size = 4});
  EXPECT_EQ(batches_of(loader), (std::vector<V>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  EXPECT_EQ(stream->epoch, 0u);
  EXPECT_EQ(batches_of(loader), (std::vector<V>{{100, 101, 102, 103}, {104, 105, 106, 107}, {108, 109}}));
  DataLoader dropping(stream, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(batches_of(dropping).size(), 2u);
  EXPECT_FALSE(loader.has_size());
  EXPECT_THROW(loader.size(), Error);
}

TEST(DataLoader, PinnedMemoryWithoutAGpuIsPlainMemoryWithTheSameBatches) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present: batches really are pinned there";
  DataLoader plain(numbers(10), {.batch_size = 4, .num_workers = 2});
  DataLoader pinned(numbers(10), {.batch_size = 4, .num_workers = 2, .pin_memory = true});
  EXPECT_EQ(batches_of(pinned), batches_of(plain));
  for (auto& [x, y] : pinned) {
    EXPECT_TRUE(x.device().is_cpu());
    EXPECT_FALSE(x.is_pinned());
  }
}

TEST(DataLoader, AGpuDeviceWithoutAGpuIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  try {
    DataLoader loader(numbers(4), {.batch_size = 2, .device = cuda_device(0)});
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("device cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("use device = cpu"), std::string::npos) << m;
  }
  DataLoader loader(numbers(4), {.batch_size = 2});
  EXPECT_THROW(loader.set_device(cuda_device(0)), Error);
  loader.set_device(kCPU);
  EXPECT_EQ(batches_of(loader), (std::vector<V>{{0, 1}, {2, 3}}));
}
