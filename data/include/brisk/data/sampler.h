// Samplers: the order in which a map-style dataset's indices are visited in each epoch.
// An order is a pure function of the epoch (`indices(epoch)`), so loaders, workers and
// ranks can all compute the same plan without sharing state.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace brisk::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices visited in `epoch`, in order.
  virtual std::vector<int64_t> indices(uint64_t epoch) const = 0;
  // How many indices each epoch yields.
  virtual int64_t size() const = 0;
  // PyTorch-style current epoch, for loops that call `sampler.set_epoch(e)`.
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }
  std::vector<int64_t> current_indices() const { return indices(epoch_); }

 private:
  uint64_t epoch_ = 0;
};

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(uint64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

// A permutation of 0..n-1 drawn with randperm from Generator(seed + epoch): the same
// (seed, epoch) gives the same order everywhere; each epoch reshuffles.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t n, uint64_t seed = 0);
  std::vector<int64_t> indices(uint64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

// PyTorch's DistributedSampler: every rank computes the same order (a permutation seeded
// by seed + epoch when shuffling, else 0..size-1); without drop_last the order is padded by
// repeating its head up to a multiple of num_replicas, with it the tail is cut; rank r
// takes order[r], order[r + N], order[r + 2N], ...
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t size, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<int64_t> indices(uint64_t epoch) const override;
  // Indices per rank: ceil(size / N), or floor with drop_last.
  int64_t size() const override { return per_rank_; }
  int64_t total_size() const { return per_rank_ * num_replicas_; }
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }
  bool drop_last() const { return drop_last_; }

 private:
  int64_t dataset_size_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t per_rank_;
};

// Groups another sampler's indices into batches of batch_size (the last one smaller unless
// drop_last).
class BatchSampler {
 public:
  BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last = false);
  std::vector<std::vector<int64_t>> batches(uint64_t epoch) const;
  // Batches per epoch.
  int64_t size() const;
  const std::shared_ptr<Sampler>& sampler() const { return sampler_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }

 private:
  std::shared_ptr<Sampler> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

// Splits an index list into batches (shared by BatchSampler and the DataLoader).
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last);

}  // namespace brisk::data
