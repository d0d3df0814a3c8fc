// The DataLoader's epoch runs: the plan, the synchronous path, the worker pool with its
// ordered prefetch window, and the iterable-dataset path.
#include "brisk/data/dataloader.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

namespace brisk::data {

namespace detail {

// One pass over a plan. Workers claim batches in plan order, never more than `window`
// past the one the caller holds, and park results in per-batch slots; the caller takes
// slot k for batch k, so order and values do not depend on the worker count.
struct EpochRun {
  struct Slot {
    bool ready = false;
    Batch batch;
    std::exception_ptr error;
  };

  std::shared_ptr<Dataset> dataset;
  std::shared_ptr<IterableDataset> iterable;
  int64_t batch_size = 1;
  bool drop_last = false;
  BatchPlan plan;
  std::shared_ptr<std::atomic<int64_t>> position;

  int64_t current = -1;  // plan position of `batch`
  bool done = false;
  Batch batch;
  FetchWrapper fetch_wrapper;  // wraps each fetch (the Accelerator traces data loading with it)

  void fetch_wrapped(int64_t k) {
    if (fetch_wrapper)
      fetch_wrapper([&] { fetch(k); });
    else
      fetch(k);
  }

  // Worker state (guarded by mu).
  std::mutex mu;
  std::condition_variable work_cv, ready_cv;
  std::vector<Slot> slots;
  int64_t next_claim = 0;
  int64_t window = 0;
  bool stop = false;
  std::vector<std::thread> threads;

  ~EpochRun() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (std::thread& t : threads) t.join();
  }

  void start_workers(int64_t num_workers, int64_t prefetch_factor, int64_t first) {
    slots.resize(plan.size());
    next_claim = first;
    window = num_workers * prefetch_factor;
    threads.reserve(static_cast<size_t>(num_workers));
    for (int64_t w = 0; w < num_workers; ++w) threads.emplace_back([this] { worker_loop(); });
  }

  void worker_loop() {
    const int64_t n = static_cast<int64_t>(plan.size());
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      // Batch `current` is held by the caller; up to `window` more may be in flight.
      work_cv.wait(lock, [&] { return stop || next_claim >= n || next_claim <= current + window; });
      if (stop || next_claim >= n) return;
      const int64_t k = next_claim++;
      lock.unlock();
      Slot result;
      try {
        result.batch = dataset->get_batch(plan[static_cast<size_t>(k)]);
      } catch (...) {
        result.error = std::current_exception();
      }
      lock.lock();
      result.ready = true;
      slots[static_cast<size_t>(k)] = std::move(result);
      ready_cv.notify_all();
    }
  }

  // Moves to plan position k (k == current + 1), re-throwing a failure of that batch.
  void fetch(int64_t k) {
    const int64_t n = static_cast<int64_t>(plan.size());
    if (iterable) return fetch_stream();
    if (k >= n) {
      finish();
      return;
    }
    if (threads.empty()) {
      current = k;
      try {
        batch = dataset->get_batch(plan[static_cast<size_t>(k)]);
      } catch (...) {
        finish();
        throw;
      }
    } else {
      std::unique_lock<std::mutex> lock(mu);
      Slot& slot = slots[static_cast<size_t>(k)];
      ready_cv.wait(lock, [&] { return slot.ready; });
      Slot taken = std::move(slot);
      current = k;
      lock.unlock();
      work_cv.notify_all();  // the window moved
      if (taken.error) {
        finish();
        std::rethrow_exception(taken.error);
      }
      batch = std::move(taken.batch);
    }
    position->store(k + 1);
  }

  void fetch_stream() {
    std::vector<Example> examples;
    examples.reserve(static_cast<size_t>(batch_size));
    try {
      while (static_cast<int64_t>(examples.size()) < batch_size) {
        std::optional<Example> e = iterable->next();
        if (!e) break;
        examples.push_back(std::move(*e));
      }
    } catch (...) {
      finish();
      throw;
    }
    if (examples.empty() || (drop_last && static_cast<int64_t>(examples.size()) < batch_size)) {
      finish();
      return;
    }
    batch = collate(examples);
    ++current;
    position->store(current + 1);
  }

  void finish() {
    done = true;
    batch = Batch();
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    work_cv.notify_all();
  }
};

}  // namespace detail

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  BRISK_CHECK(dataset_ != nullptr, "DataLoader: dataset is null");
  check_options();
  BRISK_CHECK(!(options_.shuffle && options_.sampler), "DataLoader: shuffle and sampler are mutually exclusive ",
              "(shuffle with the sampler itself, e.g. RandomSampler or DistributedSampler)");
  if (options_.sampler) sampler_ = options_.sampler;
  else if (options_.shuffle) sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.seed);
  else sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
}

DataLoader::DataLoader(std::shared_ptr<IterableDataset> dataset, DataLoaderOptions options)
    : iterable_(std::move(dataset)), options_(std::move(options)) {
  BRISK_CHECK(iterable_ != nullptr, "DataLoader: dataset is null");
  check_options();
  BRISK_CHECK(!options_.shuffle && !options_.sampler,
              "DataLoader: an IterableDataset has no indices, so shuffle and sampler do not apply");
}

void DataLoader::check_options() const {
  BRISK_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be at least 1, got ", options_.batch_size);
  BRISK_CHECK(options_.num_workers >= 0, "DataLoader: num_workers must be non-negative, got ", options_.num_workers);
  BRISK_CHECK(options_.prefetch_factor >= 1, "DataLoader: prefetch_factor must be at least 1, got ",
              options_.prefetch_factor);
}

BatchPlan DataLoader::default_batch_indices(uint64_t epoch) const {
  BRISK_CHECK(dataset_ != nullptr, "DataLoader::batch_indices: an IterableDataset has no index plan");
  return make_batches(sampler_->indices(epoch), options_.batch_size, options_.drop_last);
}

BatchPlan DataLoader::batch_indices(uint64_t epoch) const {
  return source_ ? source_(epoch) : default_batch_indices(epoch);
}

int64_t DataLoader::size() const {
  BRISK_CHECK(dataset_ != nullptr, "DataLoader::size: the length of a loader over an IterableDataset is unknown");
  if (source_) return static_cast<int64_t>(source_(epoch_).size());
  const int64_t n = sampler_->size(), bs = options_.batch_size;
  return options_.drop_last ? n / bs : (n + bs - 1) / bs;
}

void DataLoader::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  epoch_pinned_ = true;
}

void DataLoader::set_start_batch(int64_t n) {
  BRISK_CHECK(n >= 0, "DataLoader::set_start_batch: batch must be non-negative, got ", n);
  start_batch_ = n;
}

DataLoader::Iterator DataLoader::begin() {
  if (epoch_pinned_) epoch_pinned_ = false;
  else if (started_) ++epoch_;
  started_ = true;
  const int64_t first = start_batch_;
  start_batch_ = 0;

  auto run = std::make_shared<detail::EpochRun>();
  run->position = position_;
  run->batch_size = options_.batch_size;
  run->drop_last = options_.drop_last;
  position_->store(0);
  if (iterable_) {
    BRISK_CHECK(first == 0, "DataLoader: set_start_batch is not supported for an IterableDataset");
    run->iterable = iterable_;
    iterable_->reset(epoch_);
    run->fetch_wrapper = fetch_wrapper_;
    run->fetch_wrapped(0);
    return Iterator(run);
  }
  run->dataset = dataset_;
  run->plan = batch_indices(epoch_);
  BRISK_CHECK(first <= static_cast<int64_t>(run->plan.size()), "DataLoader: start batch ", first, " is past the ",
              run->plan.size(), " batches of epoch ", epoch_);
  position_->store(first);
  run->current = first - 1;
  dataset_->set_epoch(epoch_);
  if (options_.num_workers > 0 && first < static_cast<int64_t>(run->plan.size()))
    run->start_workers(options_.num_workers, options_.prefetch_factor, first);
  run->fetch_wrapper = fetch_wrapper_;
  run->fetch_wrapped(first);
  return Iterator(run);
}

Batch& DataLoader::Iterator::operator*() const {
  BRISK_CHECK(run_ != nullptr && !run_->done, "DataLoader::Iterator: dereferencing an iterator past the end");
  return run_->batch;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  BRISK_CHECK(run_ != nullptr && !run_->done, "DataLoader::Iterator: advancing an iterator past the end");
  run_->fetch_wrapped(run_->current + 1);
  return *this;
}

bool DataLoader::Iterator::operator==(std::default_sentinel_t) const { return run_ == nullptr || run_->done; }

int64_t DataLoader::Iterator::index() const { return run_ ? run_->current : -1; }

}  // namespace brisk::data
