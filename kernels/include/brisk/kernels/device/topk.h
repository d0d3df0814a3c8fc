// Top-k on the GPU as a sort, written for host and device: each element of a row becomes an item
// (key, index) whose ascending order is the order the CPU's topk picks in (largest: NaN first,
// then descending values; smallest: ascending values, NaN last; ties by lower index), so the first
// k items of a sorted row are the answer, and sorting those k again by index gives the unsorted
// (index-order) answer. Rows are padded to a power of two with items that sort last and sorted
// by a bitonic network: steps whose pairs lie within a tile of `tile` items run in shared memory
// (one block a tile), larger strides one step a launch over global memory. The host tests run
// the same keys and network against the CPU kernel and check the launch schedule.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "brisk/core/dtype.h"
#include "brisk/core/macros.h"
#include "brisk/kernels/device/convert.h"

namespace brisk::kernels::device {

// 64-bit keys for 8-byte types, 32-bit otherwise.
template <class T>
using topk_key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

// An order-preserving unsigned key: key(a) < key(b) iff a < b, equal values (-0 and +0 too) give
// equal keys, and every NaN gives the largest key.
template <class T>
BRISK_HOST_DEVICE inline topk_key_t<T> order_key(T v) {
  using A = acc_t<T>;
  if constexpr (std::is_same_v<A, float>) {
    float f = to_acc(v);
    if (f != f) return 0xffffffffu;
    if (f == 0.0f) f = 0.0f;
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  } else if constexpr (std::is_same_v<A, double>) {
    double f = v;
    if (f != f) return ~uint64_t{0};
    if (f == 0.0) f = 0.0;
    uint64_t b;
    memcpy(&b, &f, sizeof(b));
    return (b >> 63) ? ~b : (b | (uint64_t{1} << 63));
  } else if constexpr (std::is_signed_v<T>) {
    using K = topk_key_t<T>;
    return static_cast<K>(v) ^ (K{1} << (8 * sizeof(K) - 1));
  } else {
    return static_cast<topk_key_t<T>>(v);
  }
}

template <class Key>
struct TopkItem {
  Key key;
  uint32_t index;
};

template <class Key>
BRISK_HOST_DEVICE inline bool item_less(const TopkItem<Key>& a, const TopkItem<Key>& b) {
  return a.key < b.key || (a.key == b.key && a.index < b.index);
}

// The item of element `index` with value v: ascending item order is the order of selection.
template <class T>
BRISK_HOST_DEVICE inline TopkItem<topk_key_t<T>> topk_item(T v, uint32_t index, bool largest) {
  const topk_key_t<T> k = order_key(v);
  return {largest ? static_cast<topk_key_t<T>>(~k) : k, index};
}

// Padding after a row's last element: sorts after every real item.
template <class Key>
BRISK_HOST_DEVICE inline TopkItem<Key> pad_item() {
  return {static_cast<Key>(~Key{0}), 0xffffffffu};
}

// For the second sort of the unsorted result: ordered by index alone.
template <class Key>
BRISK_HOST_DEVICE inline TopkItem<Key> index_item(uint32_t index) {
  return {static_cast<Key>(index), index};
}

// Pair t (0 <= t < m / 2) of a bitonic step with `stride` over a sequence of m items: positions lo
// and lo + stride.
BRISK_HOST_DEVICE inline int64_t bitonic_lo(int64_t t, int64_t stride) {
  return 2 * t - (t & (stride - 1));
}

// Direction of the pair at lo in step (size, ...) when rows of row_len items (a power of two) are
// sorted side by side: ascending in the final merge of a row, else alternating by size.
BRISK_HOST_DEVICE inline bool bitonic_ascending(int64_t lo, int64_t size, int64_t row_len) {
  return size >= row_len || (lo & size) == 0;
}

template <class Item>
BRISK_HOST_DEVICE inline void compare_exchange(Item& a, Item& b, bool ascending) {
  if (item_less(b, a) == ascending) {
    const Item t = a;
    a = b;
    b = t;
  }
}

// One launch of the sort: a tile launch runs, in each tile, every step of sizes size_first ..
// size_last (doubling) with strides from min(size, tile) / 2 down to 1; a global launch runs the
// single step (size_first, stride).
struct BitonicLaunch {
  bool tile;
  int64_t size_first, size_last, stride;
};

// The launches that sort rows of row_len items (a power of two) with tiles of `tile` items (a
// power of two; a tile holds whole rows when row_len <= tile).
inline std::vector<BitonicLaunch> bitonic_schedule(int64_t row_len, int64_t tile) {
  std::vector<BitonicLaunch> s;
  if (row_len < 2) return s;
  s.push_back({true, 2, row_len < tile ? row_len : tile, 0});
  for (int64_t size = 2 * tile; size <= row_len; size *= 2) {
    for (int64_t stride = size / 2; stride >= tile; stride /= 2) s.push_back({false, size, size, stride});
    s.push_back({true, size, size, 0});
  }
  return s;
}

// Host reference: the whole network, step by step, over rows of row_len items side by side.
template <class Item>
void bitonic_sort_reference(std::vector<Item>& v, int64_t row_len) {
  const int64_t m = static_cast<int64_t>(v.size());
  for (int64_t size = 2; size <= row_len; size *= 2)
    for (int64_t stride = size / 2; stride > 0; stride /= 2)
      for (int64_t t = 0; t < m / 2; ++t) {
        const int64_t lo = bitonic_lo(t, stride);
        compare_exchange(v[lo], v[lo + stride], bitonic_ascending(lo, size, row_len));
      }
}

}  // namespace brisk::kernels::device
