// Index arithmetic for GPU kernels over strided, broadcast operands, written once for host and
// device: the CUDA kernels run it per element, and the host tests run the same code against the
// CPU kernels' results. A linear index into the output's shape is turned into one element offset
// per operand by dividing by the (coalesced) sizes, innermost dim first; the divisions use
// precomputed magic numbers (FastDivmod) because integer division is slow on the GPU.
#pragma once
#include <array>
#include <cstdint>

#include "brisk/core/macros.h"
#include "brisk/core/shape.h"
#include "brisk/kernels/coalesce.h"
#include "brisk/util/error.h"

namespace brisk::kernels::device {

// Tensors with more dims than this (after coalescing) are not handled by one indexer; PyTorch
// has the same limit.
inline constexpr int kMaxDims = 25;

// Unsigned 32-bit division by a fixed divisor through a multiply-high and a shift
// (Granlund & Montgomery): exact for every n < 2^31 when 1 <= d < 2^31.
struct FastDivmod {
  uint32_t divisor = 1;
  uint32_t multiplier = 0;
  uint32_t shift = 0;

  FastDivmod() = default;
  BRISK_HOST_DEVICE explicit FastDivmod(uint32_t d) : divisor(d) {
    // shift = ceil(log2(d)); multiplier = floor(2^32 * (2^shift - d) / d) + 1
    shift = 0;
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    const uint64_t m = ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1;
    multiplier = static_cast<uint32_t>(m);
  }
  BRISK_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, multiplier);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> 32);
#endif
    return (hi + n) >> shift;
  }
  BRISK_HOST_DEVICE void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

// N operands over one output shape: sizes innermost first, and each operand's element strides.
// `narrow` is true when every linear index fits the 32-bit fast path (numel < 2^31).
template <int N>
struct StridedIndexer {
  int ndim = 0;
  bool narrow = true;
  int64_t sizes[kMaxDims] = {};  // innermost first
  FastDivmod div[kMaxDims];      // valid when narrow
  int64_t strides[kMaxDims][N] = {};

  // Element offset of every operand for output position `linear` (0 <= linear < numel).
  BRISK_HOST_DEVICE void offsets(int64_t linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    if (narrow) {
      uint32_t rem = static_cast<uint32_t>(linear);
      for (int d = 0; d < ndim; ++d) {
        uint32_t q, r;
        div[d].divmod(rem, q, r);
        for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(r) * strides[d][k];
        rem = q;
      }
    } else {
      int64_t rem = linear;
      for (int d = 0; d < ndim; ++d) {
        const int64_t q = rem / sizes[d], r = rem - q * sizes[d];
        for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
        rem = q;
      }
    }
  }
};

// Builds an indexer for `sizes` with one stride vector per operand (already broadcast to
// `sizes`, 0 where broadcast). Host only. Throws when the coalesced shape has more than
// kMaxDims dims.
template <int N>
StridedIndexer<N> make_indexer(const Shape& sizes, const std::array<Strides, N>& strides) {
  const StridedShape<N> s = coalesce<N>(sizes, strides);
  StridedIndexer<N> ix;
  if (shape_numel(sizes) == 0) return ix;  // nothing to index (and no size to divide by)
  const int nd = static_cast<int>(s.sizes.size());
  BRISK_CHECK(nd <= kMaxDims, "cuda kernels: a tensor of shape ", sizes, " has ", nd, " non-mergeable dims; at most ",
              kMaxDims, " are supported");
  ix.ndim = nd;
  const int64_t numel = shape_numel(sizes);
  ix.narrow = numel < (int64_t{1} << 31);
  for (int d = 0; d < nd; ++d) {
    const int src = nd - 1 - d;  // innermost first
    ix.sizes[d] = s.sizes[src];
    if (ix.narrow) ix.div[d] = FastDivmod(static_cast<uint32_t>(s.sizes[src]));
    for (int k = 0; k < N; ++k) ix.strides[d][k] = s.strides[k][src];
  }
  return ix;
}

}  // namespace brisk::kernels::device
