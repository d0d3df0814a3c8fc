// Dropout's keep decisions, written once for the CPU loop and the CUDA kernel: element i is kept
// when the uniform float from word i % 4 of Philox block (seed, base + i / 4) is >= p, so a seed
// gives the same mask on every device and thread count.
#pragma once
#include <cstdint>

#include "brisk/core/macros.h"
#include "brisk/core/rng.h"

namespace brisk::kernels::device {

// Philox counters one dropout over n elements reserves (one block of 4 words per 4 elements).
BRISK_HOST_DEVICE constexpr uint64_t dropout_counters(int64_t n) {
  return static_cast<uint64_t>((n + 3) / 4);
}

// The decisions for elements [4 * block, 4 * block + 4): keep[l] is element 4 * block + l's.
BRISK_HOST_DEVICE inline void dropout_keep4(uint64_t seed, uint64_t base, int64_t block, float p, bool keep[4]) {
  uint32_t r[4];
  Philox::block(seed, base + static_cast<uint64_t>(block), r);
  for (int l = 0; l < 4; ++l) keep[l] = Philox::to_unit_float(r[l]) >= p;
}

// One element's decision (lane i % 4 of dropout_keep4 for block i / 4).
BRISK_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t base, int64_t i, float p) {
  uint32_t r[4];
  Philox::block(seed, base + static_cast<uint64_t>(i / 4), r);
  return Philox::to_unit_float(r[i % 4]) >= p;
}

}  // namespace brisk::kernels::device
