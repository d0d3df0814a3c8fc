// Datasets: map-style (`size()` and `get(i)`) and iterable (a stream of examples), the
// Example/Batch pair they produce, and TensorDataset over in-memory tensors.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::data {

// One sample: its input and its target (either may be undefined for unlabelled data).
struct Example {
  Tensor data, target;
};

// Samples stacked along a new leading dim: data (B, ...), target (B, ...).
// `for (auto& [x, y] : loader)` binds x = data, y = target.
struct Batch {
  Tensor data, target;
};

// Stacks examples along a new dim 0 (shapes and dtypes must agree across the examples).
Batch collate(const std::vector<Example>& examples);

// A map-style dataset: examples addressed by index in [0, size()). get/get_batch must be
// safe to call from several threads at once (the DataLoader's workers do).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, stacked. Default: collate(get(i)...); datasets over big
  // tensors override it with one index_select per tensor.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
  // Told by the DataLoader at the start of each epoch, before any get: random transforms
  // draw from (seed, epoch, index). Default: nothing.
  virtual void set_epoch(uint64_t epoch) { (void)epoch; }
};

// A stream of examples (no random access): next() until it returns nothing; reset(epoch)
// starts the stream over for an epoch (the DataLoader calls it at each iteration's start).
class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  virtual std::optional<Example> next() = 0;
  virtual void reset(uint64_t epoch) = 0;
};

// Examples are the rows (dim 0) of `data` and `targets`; targets may be undefined.
class TensorDataset : public Dataset {
 public:
  TensorDataset(const Tensor& data, const Tensor& targets);
  int64_t size() const override { return data_.size(0); }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_, targets_;
};

}  // namespace brisk::data
