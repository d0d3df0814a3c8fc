// The BPE merge rules by token pair (data/src/bpe.cpp): an open-addressing hash table with linear
// probing in a power-of-two table at most half full. The merge loop's lookups are most of an
// encode's time; std::unordered_map's node chasing and modulo cost more.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace brisk::data::detail {

struct MergeRule {
  uint32_t rank;
  int32_t merged;
};

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

class PairTable {
 public:
  // Inserts or replaces.
  void set(uint64_t key, MergeRule rule) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    Slot& s = probe(key);
    if (s.key == kEmpty) ++size_;
    s.key = key;
    s.rule = rule;
  }
  const MergeRule* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = index(key);; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.rule;
      if (s.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // no pair of non-negative ids has this key
  struct Slot {
    uint64_t key = kEmpty;
    MergeRule rule{};
  };
  std::vector<Slot> slots_;
  int shift_ = 64;
  size_t size_ = 0;
  size_t index(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  Slot& probe(uint64_t key) {
    const size_t mask = slots_.size() - 1;
    for (size_t i = index(key);; i = (i + 1) & mask)
      if (slots_[i].key == key || slots_[i].key == kEmpty) return slots_[i];
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t cap = std::max<size_t>(16, 2 * old.size());
    slots_.assign(cap, Slot{});
    shift_ = 64 - std::countr_zero(cap);
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) set(s.key, s.rule);
  }
};

}  // namespace brisk::data::detail
