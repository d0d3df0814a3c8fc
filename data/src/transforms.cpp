// Normalize, RandomCrop, RandomHorizontalFlip, Compose and TransformDataset. The random
// ones copy bytes (any dtype; zero bytes are zero in every dtype brisk has).
#include "brisk/data/transforms.h"

#include <cstring>

#include "brisk/core/rng.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/index.h"

namespace brisk::data {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Four random words for (seed, salt, epoch, index); `salt` keeps transform kinds that share
// a seed independent of each other.
void draw(uint64_t seed, uint64_t salt, const SampleContext& ctx, uint32_t out[4]) {
  const uint64_t key = splitmix64(seed ^ splitmix64(ctx.epoch ^ (salt << 56)));
  Philox::block(key, static_cast<uint64_t>(ctx.index), out);
}

// x as a contiguous (C, H, W) tensor (a 2-D sample becomes one channel).
Tensor as_chw(const Tensor& x, const char* op) {
  BRISK_CHECK(x.dim() == 2 || x.dim() == 3, op, ": expected a (C, H, W) or (H, W) sample, got shape ", x.sizes());
  Tensor c = kernels::contiguous(x);
  if (c.dim() == 2) c = c.as_strided({1, c.size(0), c.size(1)}, {c.size(0) * c.size(1), c.size(1), 1}, c.offset());
  return c;
}

Tensor like_input(const Tensor& out, const Tensor& x) {
  if (x.dim() == 3) return out;
  return out.as_strided({out.size(1), out.size(2)}, {out.size(2), 1}, out.offset());
}

}  // namespace

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  BRISK_CHECK(!mean_.empty() && mean_.size() == std_.size(),
              "Normalize: mean and std need the same non-zero length, got ", mean_.size(), " and ", std_.size());
  for (double s : std_) BRISK_CHECK(s != 0.0, "Normalize: std must be non-zero, got ", std_);
}

Tensor Normalize::operator()(const Tensor& x, const SampleContext&) const {
  BRISK_CHECK(x.is_floating_point(), "Normalize: expected a floating-point sample, got ", x.dtype());
  Tensor c = as_chw(x, "Normalize");
  const int64_t channels = c.size(0), plane = c.size(1) * c.size(2);
  BRISK_CHECK(mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == channels, "Normalize: ", mean_.size(),
              " means for a sample with ", channels, " channels (shape ", x.sizes(), ")");
  const bool wide = c.dtype() == DType::F64;
  Tensor work = kernels::cast(c, wide ? DType::F64 : DType::F32);  // a fresh copy we may write
  for (int64_t ch = 0; ch < channels; ++ch) {
    const size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(ch);
    if (wide) {
      double* p = work.data<double>() + ch * plane;
      for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - mean_[k]) / std_[k];
    } else {
      const float m = static_cast<float>(mean_[k]), s = static_cast<float>(std_[k]);
      float* p = work.data<float>() + ch * plane;
      for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - m) / s;
    }
  }
  if (work.dtype() != c.dtype()) work = kernels::cast(work, c.dtype());
  return like_input(work, x);
}

RandomCrop::RandomCrop(int64_t size, int64_t padding, uint64_t seed) : size_(size), padding_(padding), seed_(seed) {
  BRISK_CHECK(size >= 1, "RandomCrop: size must be at least 1, got ", size);
  BRISK_CHECK(padding >= 0, "RandomCrop: padding must be non-negative, got ", padding);
}

Tensor RandomCrop::operator()(const Tensor& x, const SampleContext& ctx) const {
  Tensor c = as_chw(x, "RandomCrop");
  const int64_t C = c.size(0), H = c.size(1), W = c.size(2), p = padding_;
  BRISK_CHECK(H + 2 * p >= size_ && W + 2 * p >= size_, "RandomCrop: crop ", size_, "x", size_,
              " is larger than the padded sample ", H + 2 * p, "x", W + 2 * p, " (shape ", x.sizes(), ", padding ", p,
              ")");
  uint32_t r[4];
  draw(seed_, 1, ctx, r);
  const int64_t top = static_cast<int64_t>(r[0] % static_cast<uint64_t>(H + 2 * p - size_ + 1));
  const int64_t left = static_cast<int64_t>(r[1] % static_cast<uint64_t>(W + 2 * p - size_ + 1));
  Tensor out = empty({C, size_, size_}, c.dtype(), c.device());
  const size_t es = c.element_size();
  const auto* src = static_cast<const uint8_t*>(c.data_ptr());
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  std::memset(dst, 0, out.nbytes());
  // Output column j reads input column left + j - p; copy the in-range run of each row.
  const int64_t j0 = std::max<int64_t>(0, p - left), j1 = std::min<int64_t>(size_, W + p - left);
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t i = 0; i < size_; ++i) {
      const int64_t y = top + i - p;
      if (y < 0 || y >= H || j1 <= j0) continue;
      const int64_t xs = left + j0 - p;
      std::memcpy(dst + ((ch * size_ + i) * size_ + j0) * es, src + ((ch * H + y) * W + xs) * es,
                  static_cast<size_t>(j1 - j0) * es);
    }
  return like_input(out, x);
}

RandomHorizontalFlip::RandomHorizontalFlip(double p, uint64_t seed) : p_(p), seed_(seed) {
  BRISK_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x, const SampleContext& ctx) const {
  Tensor c = as_chw(x, "RandomHorizontalFlip");
  uint32_t r[4];
  draw(seed_, 2, ctx, r);
  if (!(Philox::to_unit_double(r[0], r[1]) < p_)) return x;
  const int64_t rows = c.size(0) * c.size(1), W = c.size(2);
  const size_t es = c.element_size();
  Tensor out = empty(c.sizes(), c.dtype(), c.device());
  const auto* src = static_cast<const uint8_t*>(c.data_ptr());
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  for (int64_t rI = 0; rI < rows; ++rI)
    for (int64_t j = 0; j < W; ++j) std::memcpy(dst + (rI * W + j) * es, src + (rI * W + (W - 1 - j)) * es, es);
  return like_input(out, x);
}

Compose::Compose(std::vector<std::shared_ptr<Transform>> stages) : stages_(std::move(stages)) {
  for (const auto& s : stages_) BRISK_CHECK(s != nullptr, "Compose: a transform is null");
}

Tensor Compose::operator()(const Tensor& x, const SampleContext& ctx) const {
  Tensor y = x;
  for (const auto& s : stages_) y = (*s)(y, ctx);
  return y;
}

TransformDataset::TransformDataset(std::shared_ptr<Dataset> dataset, std::shared_ptr<Transform> transform)
    : dataset_(std::move(dataset)), transform_(std::move(transform)) {
  BRISK_CHECK(dataset_ != nullptr, "TransformDataset: dataset is null");
  BRISK_CHECK(transform_ != nullptr, "TransformDataset: transform is null");
}

Example TransformDataset::get(int64_t index) const {
  Example e = dataset_->get(index);
  e.data = (*transform_)(e.data, SampleContext{epoch_.load(), index});
  return e;
}

Batch TransformDataset::get_batch(const std::vector<int64_t>& indices) const {
  Batch b = dataset_->get_batch(indices);
  const uint64_t epoch = epoch_.load();
  std::vector<Tensor> rows;
  rows.reserve(indices.size());
  const Tensor& d = b.data;
  Shape sizes(d.sizes().begin() + 1, d.sizes().end());
  Strides strides(d.strides().begin() + 1, d.strides().end());
  for (size_t k = 0; k < indices.size(); ++k) {
    Tensor row = d.as_strided(sizes, strides, d.offset() + static_cast<int64_t>(k) * d.stride(0));
    rows.push_back((*transform_)(row, SampleContext{epoch, indices[k]}));
  }
  b.data = kernels::stack(rows, 0);
  return b;
}

void TransformDataset::set_epoch(uint64_t epoch) {
  epoch_.store(epoch);
  dataset_->set_epoch(epoch);
}

}  // namespace brisk::data
