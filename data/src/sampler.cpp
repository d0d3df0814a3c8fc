// Sequential, random, distributed and batch samplers.
#include "brisk/data/sampler.h"

#include "brisk/core/rng.h"
#include "brisk/kernels/factory.h"
#include "brisk/util/error.h"

namespace brisk::data {

namespace {

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  Generator gen(seed);
  return randperm(n, &gen).to_vector<int64_t>();
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  BRISK_CHECK(n >= 0, "SequentialSampler: size must be non-negative, got ", n);
}

std::vector<int64_t> SequentialSampler::indices(uint64_t) const {
  return iota(n_);
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  BRISK_CHECK(n >= 0, "RandomSampler: size must be non-negative, got ", n);
}

std::vector<int64_t> RandomSampler::indices(uint64_t epoch) const {
  return permutation(n_, seed_ + epoch);
}

DistributedSampler::DistributedSampler(int64_t size, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : dataset_size_(size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  BRISK_CHECK(size >= 0, "DistributedSampler: dataset size must be non-negative, got ", size);
  BRISK_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be at least 1, got ", num_replicas);
  BRISK_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank ", rank, " out of range [0, ", num_replicas,
              ")");
  per_rank_ = drop_last ? size / num_replicas : (size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(uint64_t epoch) const {
  std::vector<int64_t> order = shuffle_ ? permutation(dataset_size_, seed_ + epoch) : iota(dataset_size_);
  const size_t total = static_cast<size_t>(total_size());
  if (order.size() > total) {
    order.resize(total);  // drop_last: cut the tail
  } else if (!order.empty()) {
    // Pad by repeating the head (cycling when the dataset is smaller than the padding).
    const size_t n = order.size();
    for (size_t i = 0; order.size() < total; ++i) order.push_back(order[i % n]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank_));
  for (size_t i = static_cast<size_t>(rank_); i < order.size(); i += static_cast<size_t>(num_replicas_))
    mine.push_back(order[i]);
  return mine;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& indices, int64_t batch_size,
                                               bool drop_last) {
  BRISK_CHECK(batch_size >= 1, "make_batches: batch_size must be at least 1, got ", batch_size);
  std::vector<std::vector<int64_t>> out;
  const size_t bs = static_cast<size_t>(batch_size);
  for (size_t start = 0; start < indices.size(); start += bs) {
    const size_t end = std::min(indices.size(), start + bs);
    if (drop_last && end - start < bs) break;
    out.emplace_back(indices.begin() + static_cast<std::ptrdiff_t>(start),
                     indices.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

BatchSampler::BatchSampler(std::shared_ptr<Sampler> sampler, int64_t batch_size, bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  BRISK_CHECK(sampler_ != nullptr, "BatchSampler: sampler is null");
  BRISK_CHECK(batch_size >= 1, "BatchSampler: batch_size must be at least 1, got ", batch_size);
}

std::vector<std::vector<int64_t>> BatchSampler::batches(uint64_t epoch) const {
  return make_batches(sampler_->indices(epoch), batch_size_, drop_last_);
}

int64_t BatchSampler::size() const {
  const int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

}  // namespace brisk::data
