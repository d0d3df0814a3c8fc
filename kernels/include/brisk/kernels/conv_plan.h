// The cache of cuDNN convolution plans (kernels/cuda/conv.cpp): the descriptors of a convolution
// problem, the algorithm chosen for it and that algorithm's workspace size, made once per problem
// so that a later call for the same shapes makes no descriptor, algorithm or workspace query and
// sets no math mode: one map lookup, a workspace from the caching allocator and the cuDNN
// execution call. Host-only and generic in the plan type, so tests check hits, misses, the bound
// and the algorithm ranking with a fake plan and no GPU.
#pragma once
#include <algorithm>
#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "brisk/core/dtype.h"

namespace brisk::kernels {

enum class ConvPass : uint8_t { Forward, BackwardData, BackwardFilter };

// Everything a convolution plan depends on. Every operand is dense NCHW (conv2d makes it so), so
// the sizes fix the strides. `recording`: a plan made in recording mode (its algorithm is a
// stand-in, no cuDNN heuristics ran) is never run on a GPU.
struct ConvPlanKey {
  ConvPass pass = ConvPass::Forward;
  int device = 0;
  DType dtype = DType::F32;
  std::array<int64_t, 10> dims{};    // x (n, c, h, w), w (k, c / groups, kh, kw), y (oh, ow)
  std::array<int64_t, 7> options{};  // stride h, w; padding h, w; dilation h, w; groups
  int math = 0;                      // the dtype's math mode (f32: TF32 allowed or not)
  bool benchmark = false;            // algorithms timed (cudnnFind*Ex) rather than from heuristics
  bool deterministic = false;
  bool recording = false;
  // clang-tidy 14 reads the defaulted comparison's category literal 0 as a null pointer.
  auto operator<=>(const ConvPlanKey&) const = default;  // NOLINT(modernize-use-nullptr)
};

// One algorithm as cuDNN's heuristics or timing report it.
struct ConvAlgoCandidate {
  int algo = 0;
  int math = 0;
  size_t memory = 0;  // workspace bytes
  bool ok = true;     // cuDNN's status for it was success
  bool deterministic = false;
};

// The algorithms to try, best first: cuDNN's order, deterministic ones first (the same result on
// every run), then, only when `deterministic` is off, the others; failed ones never.
inline std::vector<ConvAlgoCandidate> rank_conv_algorithms(const std::vector<ConvAlgoCandidate>& reported,
                                                           bool deterministic) {
  std::vector<ConvAlgoCandidate> det, rest;
  for (const ConvAlgoCandidate& c : reported) {
    if (!c.ok) continue;
    (c.deterministic ? det : rest).push_back(c);
  }
  if (!deterministic) det.insert(det.end(), rest.begin(), rest.end());
  return det;
}

// Plans built (one per distinct problem, or a rebuild after a cached one could not run) and calls
// that found theirs built.
struct ConvPlanStats {
  int64_t built = 0;
  int64_t reused = 0;
  size_t size = 0;
};
ConvPlanStats conv_plan_stats();
// Drops the cached plans of `device` (every device when -1) and, for -1, zeroes the counters.
void clear_conv_plans(int device = -1);

// Plans by key, at most `capacity` of them: past that the oldest goes (a network has a handful of
// convolution shapes; a capacity's worth means shapes that keep changing, where the oldest are
// the least likely to come back). Thread-safe; a plan is shared, read-only, by its users, and
// lives on while one of them still holds it after it was evicted.
template <class Plan>
class ConvPlanCache {
 public:
  static constexpr size_t kDefaultCapacity = 1024;
  explicit ConvPlanCache(size_t capacity = kDefaultCapacity) : capacity_(std::max<size_t>(capacity, 1)) {}

  // The plan for `key`, or null when there is none yet.
  std::shared_ptr<const Plan> find(const ConvPlanKey& key) {
    std::lock_guard lock(mu_);
    auto it = plans_.find(key);
    if (it == plans_.end()) return nullptr;
    ++reused_;
    return it->second;
  }

  // Stores `plan` for `key` (replacing one that could not run) and returns it.
  std::shared_ptr<const Plan> insert(const ConvPlanKey& key, std::shared_ptr<const Plan> plan) {
    std::lock_guard lock(mu_);
    ++built_;
    auto [it, fresh] = plans_.insert_or_assign(key, std::move(plan));
    if (fresh) {
      order_.push_back(key);
      while (order_.size() > capacity_) {
        plans_.erase(order_.front());
        order_.pop_front();
      }
    }
    return it->second;
  }

  void clear(int device = -1) {
    std::lock_guard lock(mu_);
    if (device < 0) {
      plans_.clear();
      order_.clear();
      built_ = reused_ = 0;
      return;
    }
    std::erase_if(order_, [&](const ConvPlanKey& k) { return k.device == device; });
    std::erase_if(plans_, [&](const auto& kv) { return kv.first.device == device; });
  }

  ConvPlanStats stats() const {
    std::lock_guard lock(mu_);
    return {built_, reused_, plans_.size()};
  }

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::map<ConvPlanKey, std::shared_ptr<const Plan>> plans_;
  std::deque<ConvPlanKey> order_;  // insertion order, for eviction
  int64_t built_ = 0;
  int64_t reused_ = 0;
};

}  // namespace brisk::kernels
