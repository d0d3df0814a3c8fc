// The CPU strided loop every elementwise kernel is built on: N operands over one shape,
// each with its own strides (0 for broadcast dims). Dims that are contiguous for every
// operand are merged, then rows of the innermost dim are handed to the body, split over
// OpenMP threads when the work is large. Results never depend on the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "brisk/core/shape.h"
#include "brisk/kernels/coalesce.h"

namespace brisk::kernels::cpu {

using kernels::broadcast_strides;
using kernels::coalesce;
using kernels::StridedShape;

inline constexpr int64_t kParallelGrain = 32768;  // elements per thread below which we stay serial

// Calls row(offsets, n, inner_strides) for every innermost row, where offsets[k] is the
// element offset of operand k at the row's start.
template <int N, class Row>
void for_each_row(const StridedShape<N>& s, Row&& row) {
  const int64_t nd = static_cast<int64_t>(s.sizes.size());
  const int64_t inner = s.sizes.back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) rows *= s.sizes[d];
  // Nothing to visit: an empty operand may have no storage, and even a zero-length row's
  // offset into it would be pointer arithmetic on null.
  if (rows == 0 || inner == 0) return;
  std::array<int64_t, N> inner_strides;
  for (int k = 0; k < N; ++k) inner_strides[k] = s.strides[k].back();

  auto run_range = [&](int64_t r0, int64_t r1) {
    if (r0 >= r1) return;
    // offsets of row r0
    std::vector<int64_t> idx(static_cast<size_t>(nd > 1 ? nd - 1 : 1), 0);
    std::array<int64_t, N> off{};
    int64_t rem = r0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % s.sizes[d];
      rem /= s.sizes[d];
      for (int k = 0; k < N; ++k) off[k] += idx[d] * s.strides[k][d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(off, inner, inner_strides);
      for (int64_t d = nd - 2; d >= 0; --d) {
        for (int k = 0; k < N; ++k) off[k] += s.strides[k][d];
        if (++idx[d] < s.sizes[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= s.strides[k][d] * s.sizes[d];
        idx[d] = 0;
      }
    }
  };

  const int64_t total = rows * inner;
  if (total < 2 * kParallelGrain) {
    run_range(0, rows);
    return;
  }
  if (rows == 1) {
    // One long row: split it into chunks.
    const int64_t chunks = (inner + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t b = c * kParallelGrain, e = std::min(inner, b + kParallelGrain);
      std::array<int64_t, N> off;
      for (int k = 0; k < N; ++k) off[k] = b * inner_strides[k];
      row(off, e - b, inner_strides);
    }
    return;
  }
  const int64_t rows_per_chunk = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1));
  const int64_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) run_range(c * rows_per_chunk, std::min(rows, (c + 1) * rows_per_chunk));
}

}  // namespace brisk::kernels::cpu
