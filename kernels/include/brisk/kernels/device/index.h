// Index arithmetic and per-row sampling for the CUDA index kernels, written once for host and
// device: 64-bit-safe division of linear indices, and multinomial's draws computed exactly as the
// CPU loop computes them (sequential double sums in category order), so a seed gives the same
// samples on every device. Host tests (tests/cuda/test_device_index.cpp) compare them with the
// CPU kernels.
#pragma once
#include <cstdint>

#include "brisk/core/macros.h"
#include "brisk/core/rng.h"
#include "brisk/kernels/device/indexing.h"

namespace brisk::kernels::device {

// Division by a fixed divisor d >= 1 of linear indices up to max_dividend: FastDivmod's 32-bit
// multiply-high when every dividend and d are below 2^31, plain 64-bit division otherwise.
struct IndexDiv {
  FastDivmod fast;
  int64_t divisor = 1;
  bool narrow = true;

  IndexDiv() = default;
  IndexDiv(int64_t d, int64_t max_dividend) : divisor(d < 1 ? 1 : d) {
    narrow = max_dividend < (int64_t{1} << 31) && divisor < (int64_t{1} << 31);
    if (narrow) fast = FastDivmod(static_cast<uint32_t>(divisor));
  }
  BRISK_HOST_DEVICE void divmod(int64_t n, int64_t& q, int64_t& r) const {
    if (narrow) {
      uint32_t q32, r32;
      fast.divmod(static_cast<uint32_t>(n), q32, r32);
      q = q32;
      r = r32;
    } else {
      q = n / divisor;
      r = n - q * divisor;
    }
  }
};

// --- runs of a sorted index ---------------------------------------------------------------

// The deterministic scatter-adds (embedding_backward, index_add_) sort the index stably and give
// each run of equal keys to the thread at its first key, which adds the run's sources in
// position (= index) order. Calls f(position) for the run that starts at k and returns true;
// returns false, calling nothing, when k does not start a run or holds a bad value (>= limit,
// which the sort puts last).
template <class F>
BRISK_HOST_DEVICE inline bool for_each_in_run(const uint32_t* keys, const int32_t* positions, int64_t n, int64_t k,
                                              int64_t limit, F&& f) {
  const uint32_t v = keys[k];
  if (static_cast<int64_t>(v) >= limit || (k > 0 && keys[k - 1] == v)) return false;
  for (int64_t q = k; q < n && keys[q] == v; ++q) f(static_cast<int64_t>(positions[q]));
  return true;
}

// --- multinomial ---------------------------------------------------------------------------

// The uniform double in [0, 1) of Philox counter `counter` (words 0 and 1); draw s of row r
// uses counter base + r * num_samples + s.
BRISK_HOST_DEVICE inline double multinomial_unit(uint64_t seed, uint64_t counter) {
  uint32_t v[4];
  Philox::block(seed, counter, v);
  return Philox::to_unit_double(v[0], v[1]);
}

// One row's weights summed in category order, the last category with a positive weight (0 when
// none), how many are positive, and whether every weight is finite and non-negative.
struct MultinomialRow {
  double total = 0;
  int64_t last_nonzero = 0;
  int64_t nonzero = 0;
  bool valid = true;
};
BRISK_HOST_DEVICE inline MultinomialRow multinomial_row(const double* w, int64_t n) {
  MultinomialRow r;
  for (int64_t i = 0; i < n; ++i) {
    const double v = w[i];
    // !(v >= 0) is true for NaN; v - v is NaN for +-inf.
    if (!(v >= 0) || v - v != 0) r.valid = false;
    r.total += v;
    if (v > 0) {
      r.last_nonzero = i;
      ++r.nonzero;
    }
  }
  return r;
}

// With replacement: the first category whose running sum (in category order, the CPU's cdf)
// exceeds u = unit * total, or last_nonzero when none does (u rounded up to the total); a
// category after last_nonzero is never picked.
BRISK_HOST_DEVICE inline int64_t multinomial_pick(const double* w, int64_t n, double u, int64_t last_nonzero) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc += w[i];
    if (acc > u) return i < last_nonzero ? i : last_nonzero;
  }
  return last_nonzero;
}

// Without replacement: num_samples draws of one row in order; each picks the first category
// with a positive remaining weight whose running sum exceeds unit * (the remaining total), then
// zeroes that weight. `left` holds the row's weights and is overwritten. counter0 = base + r *
// num_samples. A row with too few positive weights (rejected before the draw) stops early and
// leaves its remaining samples at 0, never indexing out of bounds.
BRISK_HOST_DEVICE inline void multinomial_without_replacement(double* left, int64_t n, int64_t num_samples,
                                                              uint64_t seed, uint64_t counter0, int64_t* out) {
  for (int64_t s = 0; s < num_samples; ++s) out[s] = 0;
  for (int64_t s = 0; s < num_samples; ++s) {
    double total = 0;
    int64_t last = -1;
    for (int64_t i = 0; i < n; ++i) {
      total += left[i];
      if (left[i] > 0) last = i;
    }
    const double u = multinomial_unit(seed, counter0 + static_cast<uint64_t>(s)) * total;
    int64_t pick = last;
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      acc += left[i];
      if (left[i] > 0 && acc > u) {
        pick = i;
        break;
      }
    }
    if (pick < 0) return;
    out[s] = pick;
    left[pick] = 0;
  }
}

}  // namespace brisk::kernels::device
