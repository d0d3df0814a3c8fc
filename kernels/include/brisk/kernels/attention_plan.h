// The cache of cuDNN attention plans (kernels/cuda/cudnn_attention.cpp): building a cuDNN graph,
// asking its heuristics and finalizing an execution plan takes milliseconds, so each plan is built
// once per problem (shapes, strides, dtype, mask, scale, device, determinism) and every later call
// costs one map lookup. A problem cuDNN has no plan for is remembered too, with the reason, so it
// costs one attempt and not one per step. Host-only and generic in the plan type, so tests can
// check hits and misses with a fake builder and no GPU.
#pragma once
#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "brisk/core/dtype.h"

namespace brisk::kernels {

enum class SdpaPass : uint8_t { Forward, Backward };

// Everything a cuDNN attention plan depends on. Operands in the graph's order: forward q, k, v,
// out; backward q, k, v, out, grad (dO), dq, dk, dv (unused rows stay 0).
struct SdpaPlanKey {
  static constexpr int kOperands = 8;
  SdpaPass pass = SdpaPass::Forward;
  int device = 0;
  DType dtype = DType::BF16;
  bool causal = false;
  bool deterministic = false;
  bool recording = false;  // a plan made for recording mode (no cuDNN objects) is never run on a GPU
  double scale = 0;
  std::array<int64_t, 5> dims{};  // B, H, Tq, Tk, D
  std::array<std::array<int64_t, 4>, kOperands> strides{};
  // clang-tidy 14 reads the defaulted comparison's category literal 0 as a null pointer.
  auto operator<=>(const SdpaPlanKey&) const = default;  // NOLINT(modernize-use-nullptr)
};

// What the builder answers: a plan, or none and why (cuDNN's heuristics offered no engine, no
// engine finalized, ...).
template <class Plan>
struct SdpaPlanResult {
  std::shared_ptr<const Plan> plan;
  std::string why;  // set when plan is null
};

template <class Plan>
class SdpaPlanCache {
 public:
  using Result = SdpaPlanResult<Plan>;
  using Builder = std::function<Result(const SdpaPlanKey&)>;

  explicit SdpaPlanCache(Builder build) : build_(std::move(build)) {}

  // The plan for `key`, built on the first call for it (under the lock: concurrent first calls
  // for one problem build it once). A failed build is cached as well.
  Result get(const SdpaPlanKey& key) {
    std::lock_guard lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      ++hits_;
      return it->second;
    }
    ++misses_;
    Result r = build_(key);
    if (!r.plan && r.why.empty()) r.why = "the plan builder gave no plan and no reason";
    plans_.emplace(key, r);
    return r;
  }

  int64_t hits() const {
    std::lock_guard lock(mu_);
    return hits_;
  }
  // Misses are builds: one per distinct key.
  int64_t misses() const {
    std::lock_guard lock(mu_);
    return misses_;
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return plans_.size();
  }
  void clear() {
    std::lock_guard lock(mu_);
    plans_.clear();
    hits_ = misses_ = 0;
  }

 private:
  Builder build_;
  mutable std::mutex mu_;
  std::map<SdpaPlanKey, Result> plans_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace brisk::kernels
