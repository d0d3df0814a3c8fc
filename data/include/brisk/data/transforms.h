// Per-sample transforms and TransformDataset. Random transforms draw from Philox keyed by
// (seed, epoch) at counter = sample index, so a sample's augmentation depends only on
// (seed, epoch, index): never on worker count, batch composition or visiting order.
#pragma once
#include <atomic>
#include <concepts>
#include <memory>
#include <type_traits>
#include <vector>

#include "brisk/data/dataset.h"

namespace brisk::data {

// Which sample a transform is looking at.
struct SampleContext {
  uint64_t epoch = 0;
  int64_t index = 0;
};

class Transform {
 public:
  virtual ~Transform() = default;
  // x: one sample, (C, H, W) for the image transforms (H, W accepted as one channel).
  virtual Tensor operator()(const Tensor& x, const SampleContext& ctx) const = 0;
};

// (x - mean[c]) / std[c] per channel c (dim 0 of a (C, H, W) sample); one value applies to
// every channel. Floating dtypes only; f16/bf16 compute in f32.
class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(const Tensor& x, const SampleContext& ctx) const override;

 private:
  std::vector<double> mean_, std_;
};

// Zero-pads H and W by `padding` on each side, then crops a random size x size window.
class RandomCrop : public Transform {
 public:
  explicit RandomCrop(int64_t size, int64_t padding = 0, uint64_t seed = 0);
  Tensor operator()(const Tensor& x, const SampleContext& ctx) const override;

 private:
  int64_t size_, padding_;
  uint64_t seed_;
};

// Reverses W (the last dim) with probability p.
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5, uint64_t seed = 0);
  Tensor operator()(const Tensor& x, const SampleContext& ctx) const override;

 private:
  double p_;
  uint64_t seed_;
};

// Applies transforms in order: Compose(RandomCrop(28, 4), RandomHorizontalFlip(), Normalize({0.5}, {0.5})).
class Compose : public Transform {
 public:
  explicit Compose(std::vector<std::shared_ptr<Transform>> stages);
  template <class... T>
  requires(sizeof...(T) > 0 && (std::derived_from<std::remove_cvref_t<T>, Transform> && ...) &&
           !(sizeof...(T) == 1 &&
             (std::same_as<std::remove_cvref_t<T>, Compose> && ...))) explicit Compose(T&&... stages)
      : Compose(std::vector<std::shared_ptr<Transform>>{
            std::make_shared<std::remove_cvref_t<T>>(std::forward<T>(stages))...}) {}
  Tensor operator()(const Tensor& x, const SampleContext& ctx) const override;

 private:
  std::vector<std::shared_ptr<Transform>> stages_;
};

// A dataset whose examples' data go through `transform` (targets unchanged). The epoch
// comes from set_epoch, which the DataLoader calls at the start of every epoch.
class TransformDataset : public Dataset {
 public:
  TransformDataset(std::shared_ptr<Dataset> dataset, std::shared_ptr<Transform> transform);
  template <class D, class T>
  requires std::derived_from<std::remove_cvref_t<D>, Dataset> && std::derived_from<std::remove_cvref_t<T>, Transform>
  TransformDataset(D&& dataset, T&& transform)
      : TransformDataset(std::make_shared<std::remove_cvref_t<D>>(std::forward<D>(dataset)),
                         std::make_shared<std::remove_cvref_t<T>>(std::forward<T>(transform))) {}
  // Copies share the wrapped dataset and transform.
  TransformDataset(const TransformDataset& o)
      : dataset_(o.dataset_), transform_(o.transform_), epoch_(o.epoch_.load()) {}

  int64_t size() const override { return dataset_->size(); }
  Example get(int64_t index) const override;
  // The wrapped dataset's batch (one index_select when it has one), then the transform per row.
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  void set_epoch(uint64_t epoch) override;
  uint64_t epoch() const { return epoch_.load(); }

 private:
  std::shared_ptr<Dataset> dataset_;
  std::shared_ptr<Transform> transform_;
  std::atomic<uint64_t> epoch_{0};
};

}  // namespace brisk::data
