// The DataLoader's epoch runs: the plan, the synchronous path, the worker pool with its
// ordered prefetch window, the iterable-dataset path, and placement (pinned memory, copies to a
// GPU on a side stream ordered before the consumer's stream by an event).
#include "brisk/data/dataloader.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/version.h"

namespace brisk::data {

namespace detail {

// Where batches go after they are built: pinned host memory and/or a GPU.
struct Placement {
  bool pin = false;
  Device device = kCPU;
  bool non_blocking = true;
  cuda::Stream copy_stream;  // the side stream copies to `device` run on (a GPU only)
  bool to_gpu() const { return device.is_cuda(); }
};

// One pass over a plan. Workers claim batches in plan order, never more than `window`
// past the one the caller holds, and park results in per-batch slots; the caller takes
// slot k for batch k, so order and values do not depend on the worker count.
struct EpochRun {
  struct Slot {
    bool ready = false;
    bool end = false;  // past the last batch (the plan or the stream is exhausted)
    Batch batch;
    // Recorded on the copy stream after the batch's copies to the GPU (placement.to_gpu()).
    std::shared_ptr<cuda::Event> copied;
    std::exception_ptr error;
  };

  std::shared_ptr<Dataset> dataset;
  std::shared_ptr<IterableDataset> iterable;
  int64_t batch_size = 1;
  bool drop_last = false;
  BatchPlan plan;
  std::shared_ptr<std::atomic<int64_t>> position;
  Placement placement;

  int64_t current = -1;  // plan position of `batch`
  bool done = false;
  Batch batch;
  FetchWrapper fetch_wrapper;  // wraps each fetch (the Accelerator traces data loading with it)
  // Without workers, the batch after `current`, already on its way to the GPU (see fetch()).
  std::optional<Slot> ahead;

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
      Slot result = produce(k);
      lock.lock();
      result.ready = true;
      slots[static_cast<size_t>(k)] = std::move(result);
      ready_cv.notify_all();
    }
  }

  // Pins the batch's CPU tensors and starts their copy to the GPU on the copy stream (in the
  // calling thread: a worker's, or the caller's one batch ahead).
  void place(Slot& s) const {
    const Placement& p = placement;
    if (!p.pin && !p.to_gpu()) return;
    auto pinned = [&](const Tensor& t) {
      return p.pin && t.defined() && t.device().is_cpu() ? cuda::pin_memory(t) : t;
    };
    s.batch.data = pinned(s.batch.data);
    s.batch.target = pinned(s.batch.target);
    if (!p.to_gpu()) return;
    // Allocated and copied on the copy stream: the caching allocator ties the device blocks to it,
    // and record_stream at hand-out keeps them from being reused while the consumer still reads.
    cuda::StreamGuard guard(p.copy_stream);
    auto moved = [&](const Tensor& t) {
      return t.defined() && t.device() != p.device ? kernels::to_device(t, p.device, p.non_blocking) : t;
    };
    s.batch.data = moved(s.batch.data);
    s.batch.target = moved(s.batch.target);
    s.copied = std::make_shared<cuda::Event>();
    s.copied->record(p.copy_stream);
  }

  // Builds batch k (plan position k, or the next batch_size examples of a stream) and places it;
  // a failure is kept in the slot, to be re-thrown when batch k is asked for.
  Slot produce(int64_t k) {
    // Building a batch: on a worker thread, or inside DataLoader.next without workers.
    profiler::Scope prof_scope("DataLoader.load_batch");
    Slot s;
    try {
      if (iterable) {
        std::vector<Example> examples;
        examples.reserve(static_cast<size_t>(batch_size));
        while (static_cast<int64_t>(examples.size()) < batch_size) {
          std::optional<Example> e = iterable->next();
          if (!e) break;
          examples.push_back(std::move(*e));
        }
        if (examples.empty() || (drop_last && static_cast<int64_t>(examples.size()) < batch_size)) {
          s.end = true;
          return s;
        }
        s.batch = collate(examples);
      } else {
        if (k >= static_cast<int64_t>(plan.size())) {
          s.end = true;
          return s;
        }
        s.batch = dataset->get_batch(plan[static_cast<size_t>(k)]);
      }
      place(s);
    } catch (...) {
      s.error = std::current_exception();
    }
    return s;
  }

  // Slot k: from its worker, from the look-ahead, or built now.
  Slot take(int64_t k) {
    if (ahead) {
      Slot s = std::move(*ahead);
      ahead.reset();
      return s;
    }
    if (threads.empty() || k >= static_cast<int64_t>(slots.size())) return produce(k);
    std::unique_lock<std::mutex> lock(mu);
    Slot& slot = slots[static_cast<size_t>(k)];
    ready_cv.wait(lock, [&] { return slot.ready; });
    Slot taken = std::move(slot);
    current = k;
    lock.unlock();
    work_cv.notify_all();  // the window moved
    return taken;
  }

  // Moves to batch k (k == current + 1), re-throwing a failure of that batch. On a GPU the
  // consumer's current stream waits (on the device) for the batch's copy, the batch's blocks
  // are recorded as used on that stream, and, without workers, the next batch of a map-style
  // dataset is built and its copy started, so that the copy overlaps the consumer's work on
  // this one (workers build and copy ahead by themselves).
  void fetch(int64_t k) {
    // What the training loop waits for at each `for` step (PyTorch: the DataLoader iterator's __next__).
    profiler::Scope prof_scope("DataLoader.next");
    Slot s = take(k);
    if (s.end) {
      finish();
      return;
    }
    if (threads.empty()) current = k;  // (a worker's slot set it under the lock)
    if (s.error) {
      finish();
      std::rethrow_exception(s.error);
    }
    if (s.copied) {
      const cuda::Stream consumer = cuda::current_stream(placement.device.index);
      s.copied->wait(consumer);
      for (const Tensor* t : {&s.batch.data, &s.batch.target})
        if (t->defined() && t->device().is_cuda() && t->storage()->data() != nullptr) cuda::record_stream(*t, consumer);
    }
    batch = std::move(s.batch);
    position->store(k + 1);
    // (Not for a stream: reading it ahead would move what the stream reports about its position,
    // e.g. the Accelerator's sharded stream telling the last batch.)
    if (placement.to_gpu() && threads.empty() && !iterable) ahead = produce(k + 1);
  }

  void finish() {
    done = true;
    batch = Batch();
    ahead.reset();
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
  if (options_.sampler)
    sampler_ = options_.sampler;
  else if (options_.shuffle)
    sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.seed);
  else
    sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
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
  check_device(options_.device);
}

void DataLoader::check_device(Device device) {
  if (device.is_cpu()) return;
  BRISK_CHECK(cuda::device_count() > 0, "DataLoader: device ", device.str(), " was asked for, but ",
              BRISK_BUILD_WITH_CUDA ? "no CUDA device is visible (no GPU or no driver)"
                                    : "this build of brisk has no CUDA support",
              "; use device = cpu");
  BRISK_CHECK(device.index >= 0 && device.index < cuda::device_count(), "DataLoader: device ", device.str(),
              " does not exist (", cuda::device_count(), " CUDA devices visible)");
}

void DataLoader::set_device(Device device) {
  check_device(device);
  options_.device = device;
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

DataLoader::NextBatch DataLoader::next_batch() const {
  if (!run_.expired()) return {epoch_, position()};
  if (epoch_pinned_ || !started_) return {epoch_, start_batch_};
  return {epoch_ + 1, start_batch_};
}

DataLoader::Iterator DataLoader::begin() {
  if (epoch_pinned_)
    epoch_pinned_ = false;
  else if (started_)
    ++epoch_;
  started_ = true;
  const int64_t first = start_batch_;
  start_batch_ = 0;

  auto run = std::make_shared<detail::EpochRun>();
  run_ = run;
  run->position = position_;
  run->batch_size = options_.batch_size;
  run->drop_last = options_.drop_last;
  run->placement.pin = options_.pin_memory;
  run->placement.device = options_.device;
  run->placement.non_blocking = options_.non_blocking;
  if (options_.device.is_cuda()) {
    if (!copy_stream_ || copy_stream_->device() != options_.device.index)
      copy_stream_ = cuda::Stream::create(options_.device.index);
    run->placement.copy_stream = *copy_stream_;
  }
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

bool DataLoader::Iterator::operator==(std::default_sentinel_t) const {
  return run_ == nullptr || run_->done;
}

int64_t DataLoader::Iterator::index() const {
  return run_ ? run_->current : -1;
}

}  // namespace brisk::data
