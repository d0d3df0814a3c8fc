// Dim coalescing shared by the CPU strided loop and the CUDA indexers: N operands over one
// shape, each with its own strides (0 for broadcast dims); adjacent dims that are contiguous for
// every operand merge into one, and size-1 dims drop out. Host code only, no threads.
#pragma once
#include <array>
#include <cstdint>

#include "brisk/core/shape.h"

namespace brisk::kernels {

template <int N>
struct StridedShape {
  Shape sizes;                     // after coalescing; at least one dim
  std::array<Strides, N> strides;  // per operand, in elements
};

// Merges adjacent dims that are contiguous for all operands and drops size-1 dims.
template <int N>
StridedShape<N> coalesce(const Shape& sizes, const std::array<Strides, N>& strides) {
  StridedShape<N> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!out.sizes.empty()) {
      bool merge = true;
      for (int k = 0; k < N; ++k) merge &= out.strides[k].back() == strides[k][d] * sizes[d];
      if (merge) {
        out.sizes.back() *= sizes[d];
        for (int k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
        continue;
      }
    }
    out.sizes.push_back(sizes[d]);
    for (int k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
  }
  if (out.sizes.empty()) {
    out.sizes.push_back(1);
    for (int k = 0; k < N; ++k) out.strides[k].push_back(0);
  }
  return out;
}

// Strides of `t_strides` (for shape t_sizes) broadcast to `out` (right-aligned, 0 where broadcast).
Strides broadcast_strides(const Shape& t_sizes, const Strides& t_strides, const Shape& out);

}  // namespace brisk::kernels
