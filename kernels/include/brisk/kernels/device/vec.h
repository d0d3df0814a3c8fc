// 128-bit vectorised loads and stores for GPU kernels over contiguous data, written for host and
// device. A contiguous run of n elements is cut into whole vectors of 16 bytes (read and written
// with one instruction each) and a scalar tail; grid-stride loops hand vectors to threads. The
// host tests check with these same functions that every element is covered exactly once.
#pragma once
#include <cstddef>
#include <cstdint>

#include "brisk/core/macros.h"

namespace brisk::kernels::device {

inline constexpr int kVecBytes = 16;

// Elements of T in one 16-byte vector (16 for 1-byte types, 2 for 8-byte types).
template <class T>
inline constexpr int vec_width = static_cast<int>(kVecBytes / sizeof(T)) > 0 ? static_cast<int>(kVecBytes / sizeof(T))
                                                                             : 1;

template <class T, int W>
struct alignas(sizeof(T) * W) AlignedVector {
  T v[W];
};

BRISK_HOST_DEVICE inline bool is_aligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// How a contiguous run of n elements splits into `vectors` whole vectors of `width` elements
// (elements [0, vectors * width)) and a scalar tail [tail_begin, n).
struct VecSplit {
  int64_t vectors = 0;
  int64_t tail_begin = 0;
};
BRISK_HOST_DEVICE constexpr VecSplit vec_split(int64_t n, int width) {
  const int64_t v = width > 0 ? n / width : 0;
  return {v, v * width};
}

// Grid-stride ownership: item i (a vector index, or a tail element) belongs to global thread
// i % total_threads; thread t handles items t, t + total, t + 2 * total, ... This is how every
// contiguous elementwise kernel walks its range.
BRISK_HOST_DEVICE constexpr int64_t first_item(int64_t thread, int64_t /*total_threads*/) {
  return thread;
}
BRISK_HOST_DEVICE constexpr int64_t next_item(int64_t item, int64_t total_threads) {
  return item + total_threads;
}

template <class T, int W>
BRISK_HOST_DEVICE inline AlignedVector<T, W> load_vector(const T* base, int64_t vector_index) {
  return reinterpret_cast<const AlignedVector<T, W>*>(base)[vector_index];
}
template <class T, int W>
BRISK_HOST_DEVICE inline void store_vector(T* base, int64_t vector_index, const AlignedVector<T, W>& v) {
  reinterpret_cast<AlignedVector<T, W>*>(base)[vector_index] = v;
}

}  // namespace brisk::kernels::device
