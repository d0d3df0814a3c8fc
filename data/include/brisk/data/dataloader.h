// DataLoader: batches from a dataset in a per-epoch plan of index lists, optionally built by
// background worker threads with ordered prefetch. Batch k of an epoch is always yielded
// k-th and holds the same values for any num_workers; a worker's exception is re-thrown in
// the caller at the batch where it happened; breaking out early joins the workers. Batches can
// be collated into pinned host memory and copied to a GPU ahead of use on a side stream.
#pragma once
#include <atomic>
#include <concepts>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "brisk/data/dataset.h"
#include "brisk/data/sampler.h"
#include "brisk/kernels/cuda.h"

namespace brisk::data {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;         // a RandomSampler(size, seed) reseeded each epoch (seed + epoch)
  bool drop_last = false;       // drop the last batch when it is smaller than batch_size
  int64_t num_workers = 0;      // 0: batches are built in the caller's thread
  int64_t prefetch_factor = 2;  // with workers: at most num_workers * prefetch_factor batches ahead
  uint64_t seed = 0;
  std::shared_ptr<Sampler> sampler = nullptr;  // replaces the default order; excludes shuffle
  // Batches in page-locked host memory (cuda::pin_memory), so copies to a GPU can run
  // asynchronously. Plain memory where there is no GPU (or no CUDA in this build).
  bool pin_memory = false;
  // Where batches are handed out. A GPU: each batch is copied there on a side stream, one batch
  // ahead (by the workers when there are any), and the consumer's current stream waits for that
  // copy on the device before the batch is handed out. Needs a CUDA build and that GPU.
  Device device = kCPU;
  // Copies to the GPU return before they finish (safe: the consumer's stream waits for them);
  // only copies from pinned memory can be left in flight.
  bool non_blocking = true;
};

// An epoch's batches, each a list of dataset indices.
using BatchPlan = std::vector<std::vector<int64_t>>;
// Replaces the loader's plan (how the Accelerator shards batches across ranks).
using BatchSource = std::function<BatchPlan(uint64_t epoch)>;
// Called around each batch fetch with the fetch itself (to time or trace data loading).
using FetchWrapper = std::function<void(const std::function<void()>& fetch)>;

namespace detail {
struct EpochRun;
}

class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options = {});
  DataLoader(std::shared_ptr<IterableDataset> dataset, DataLoaderOptions options = {});
  // Takes a dataset by value: `DataLoader loader(FashionMNIST(Split::Train), {.batch_size = 64})`.
  // (D is constrained to datasets, so this never hides DataLoader's copy or move constructor;
  // clang-tidy 14 does not read requires-clauses.)
  // NOLINTBEGIN(bugprone-forwarding-reference-overload)
  template <class D>
  requires std::derived_from<std::remove_cvref_t<D>, Dataset> ||
      std::derived_from<std::remove_cvref_t<D>, IterableDataset>
      DataLoader(D&& dataset, DataLoaderOptions options = {})
      : DataLoader(to_shared(std::make_shared<std::remove_cvref_t<D>>(std::forward<D>(dataset))), std::move(options)) {}
  // NOLINTEND(bugprone-forwarding-reference-overload)

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using reference = Batch&;
    using pointer = Batch*;

    Iterator() = default;
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    bool operator==(std::default_sentinel_t) const;
    // Position of the current batch in the epoch's plan.
    int64_t index() const;

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<detail::EpochRun> run) : run_(std::move(run)) {}
    std::shared_ptr<detail::EpochRun> run_;
  };

  // Starts an epoch: the epoch set by set_epoch, else the previous iteration's epoch + 1
  // (0 for the first). Each call is an independent pass.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

  // Batches per epoch (len(loader)); throws for an IterableDataset, whose length is unknown.
  int64_t size() const;
  bool has_size() const { return dataset_ != nullptr; }
  // Pins the epoch of the next iteration (later iterations count up from it).
  void set_epoch(uint64_t epoch);
  // The epoch of the current (or last) iteration; before any, the one the first will use.
  uint64_t epoch() const { return epoch_; }
  // The next iteration starts at batch n of its plan (resuming mid-epoch); applies once.
  void set_start_batch(int64_t n);
  // Batches handed out so far in the current (or last) iteration, counting skipped ones.
  int64_t position() const { return position_->load(); }
  // Where the program goes on from here, which is what a checkpoint records: while an iteration
  // is under way (an iterator of it is alive) that iteration, at the batch after the one handed
  // out last; once none is (the loop ran to the end, or broke out of it early), the epoch and
  // batch the next begin() starts with. So a resumed run does what this run does next, whatever
  // its loop did.
  struct NextBatch {
    uint64_t epoch = 0;
    int64_t batch = 0;  // into that epoch's plan (may equal its length: the epoch is over)
  };
  NextBatch next_batch() const;

  // The plan of `epoch`: the batch source's if one is set, else the default plan.
  BatchPlan batch_indices(uint64_t epoch) const;
  // The plan from the sampler (or shuffle/sequential order), batch_size and drop_last.
  BatchPlan default_batch_indices(uint64_t epoch) const;
  void set_batch_source(BatchSource source) { source_ = std::move(source); }
  void set_fetch_wrapper(FetchWrapper wrapper) { fetch_wrapper_ = std::move(wrapper); }
  // Hands out later batches on `device` (the Accelerator's placement); see DataLoaderOptions::device.
  void set_device(Device device);
  bool has_batch_source() const { return static_cast<bool>(source_); }

  const DataLoaderOptions& options() const { return options_; }
  const std::shared_ptr<Dataset>& dataset() const { return dataset_; }
  const std::shared_ptr<IterableDataset>& iterable_dataset() const { return iterable_; }

 private:
  static std::shared_ptr<Dataset> to_shared(std::shared_ptr<Dataset> d) { return d; }
  static std::shared_ptr<IterableDataset> to_shared(std::shared_ptr<IterableDataset> d) { return d; }
  void check_options() const;
  static void check_device(Device device);

  std::shared_ptr<Dataset> dataset_;
  std::shared_ptr<IterableDataset> iterable_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;  // options_.sampler or the default one
  BatchSource source_;
  FetchWrapper fetch_wrapper_;
  uint64_t epoch_ = 0;
  bool epoch_pinned_ = false;
  bool started_ = false;
  int64_t start_batch_ = 0;
  std::weak_ptr<detail::EpochRun> run_;  // the iteration under way, while an iterator holds it
  std::shared_ptr<std::atomic<int64_t>> position_ = std::make_shared<std::atomic<int64_t>>(0);
  // The side stream batches are copied to options_.device on (made at the first epoch that needs
  // it and kept, so the caching allocator reuses the batches' device blocks across epochs).
  std::optional<cuda::Stream> copy_stream_;
};

}  // namespace brisk::data
