// Reduction trees for GPU kernels, with a host emulation of the same order. A block reduces
// its threads' partial values in a fixed tree: within each warp of 32 lanes a butterfly
// (lane ^ 16, ^ 8, ^ 4, ^ 2, ^ 1), then warp 0 combines the warps' results with the same
// butterfly. The order depends only on the block size, never on timing, so a GPU reduction is
// deterministic for a given launch shape, and emulate_block_reduce() computes exactly what the
// device computes (the host tests compare it with the CPU kernels).
//
// Combine ops are small structs: `identity()`, `combine(a, b)`; they are shared by host and
// device. Sum, Max/Min (NaN wins, as PyTorch), ArgMax/ArgMin (value and first index), Welford
// (mean and M2 for var/std/layer norm) and OnlineSoftmax (running max and sum of exp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "brisk/core/macros.h"

namespace brisk::kernels::device {

inline constexpr int kWarp = 32;

// --- combine ops ------------------------------------------------------------------------------

template <class A>
struct SumOp {
  BRISK_HOST_DEVICE static A identity() { return A(0); }
  BRISK_HOST_DEVICE static A combine(A a, A b) { return a + b; }
};

template <class A>
BRISK_HOST_DEVICE inline bool is_nan_value(A v) {
  if constexpr (std::numeric_limits<A>::has_quiet_NaN) {
    return v != v;
  } else {
    return false;
  }
}

template <class A>
struct MaxOp {
  BRISK_HOST_DEVICE static A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity)
      return -std::numeric_limits<A>::infinity();
    else
      return std::numeric_limits<A>::lowest();
  }
  BRISK_HOST_DEVICE static A combine(A a, A b) {
    if (is_nan_value(a)) return a;
    if (is_nan_value(b)) return b;
    return a < b ? b : a;
  }
};

template <class A>
struct MinOp {
  BRISK_HOST_DEVICE static A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity)
      return std::numeric_limits<A>::infinity();
    else
      return std::numeric_limits<A>::max();
  }
  BRISK_HOST_DEVICE static A combine(A a, A b) {
    if (is_nan_value(a)) return a;
    if (is_nan_value(b)) return b;
    return b < a ? b : a;
  }
};

// A value and its index along the reduced dim. Index -1 marks "nothing seen yet".
template <class A>
struct ValueIndex {
  A value;
  int64_t index;
};

// The largest value and the first index holding it; NaN counts as the largest (first NaN wins).
template <class A>
struct ArgMaxOp {
  BRISK_HOST_DEVICE static ValueIndex<A> identity() { return {MaxOp<A>::identity(), -1}; }
  BRISK_HOST_DEVICE static ValueIndex<A> combine(ValueIndex<A> a, ValueIndex<A> b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool an = is_nan_value(a.value), bn = is_nan_value(b.value);
    if (an || bn) {
      if (an && bn) return a.index <= b.index ? a : b;
      return an ? a : b;
    }
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index <= b.index ? a : b;
  }
};

// The smallest value and the first index holding it; NaN counts as the smallest (first NaN wins).
template <class A>
struct ArgMinOp {
  BRISK_HOST_DEVICE static ValueIndex<A> identity() { return {MinOp<A>::identity(), -1}; }
  BRISK_HOST_DEVICE static ValueIndex<A> combine(ValueIndex<A> a, ValueIndex<A> b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool an = is_nan_value(a.value), bn = is_nan_value(b.value);
    if (an || bn) {
      if (an && bn) return a.index <= b.index ? a : b;
      return an ? a : b;
    }
    if (a.value < b.value) return a;
    if (b.value < a.value) return b;
    return a.index <= b.index ? a : b;
  }
};

// Welford's running mean and sum of squared deviations, merged with Chan's formula.
template <class A>
struct WelfordState {
  A mean;
  A m2;
  A count;
};
template <class A>
struct WelfordOp {
  BRISK_HOST_DEVICE static WelfordState<A> identity() { return {A(0), A(0), A(0)}; }
  BRISK_HOST_DEVICE static WelfordState<A> push(WelfordState<A> s, A x) {
    s.count += A(1);
    const A d = x - s.mean;
    s.mean += d / s.count;
    s.m2 += d * (x - s.mean);
    return s;
  }
  BRISK_HOST_DEVICE static WelfordState<A> combine(WelfordState<A> a, WelfordState<A> b) {
    if (a.count == A(0)) return b;
    if (b.count == A(0)) return a;
    const A n = a.count + b.count;
    const A d = b.mean - a.mean;
    const A wb = b.count / n;
    return {a.mean + d * wb, a.m2 + b.m2 + d * d * a.count * wb, n};
  }
};

// Online softmax: the running maximum m and s = sum(exp(x - m)); merging rescales the smaller
// side, so one pass over a row gives both (Milakov & Gimelshein).
template <class A>
struct SoftmaxState {
  A max;
  A sum;
};
template <class A>
struct OnlineSoftmaxOp {
  BRISK_HOST_DEVICE static SoftmaxState<A> identity() { return {-std::numeric_limits<A>::infinity(), A(0)}; }
  BRISK_HOST_DEVICE static A exp_(A v) {
    using std::exp;
    return exp(v);
  }
  BRISK_HOST_DEVICE static SoftmaxState<A> push(SoftmaxState<A> s, A x) { return combine(s, {x, A(1)}); }
  BRISK_HOST_DEVICE static SoftmaxState<A> combine(SoftmaxState<A> a, SoftmaxState<A> b) {
    if (is_nan_value(a.max) || is_nan_value(b.max)) {
      const A nan = std::numeric_limits<A>::quiet_NaN();
      return {nan, nan};
    }
    // A side whose max is -inf adds exp(-inf) = 0 (a row of only -inf keeps sum 0 and
    // normalises to NaN, as on the CPU).
    if (b.max == -std::numeric_limits<A>::infinity()) return a;
    if (a.max == -std::numeric_limits<A>::infinity()) return b;
    if (a.max >= b.max) return {a.max, a.sum + b.sum * exp_(b.max - a.max)};
    return {b.max, b.sum + a.sum * exp_(a.max - b.max)};
  }
};

// --- device trees -------------------------------------------------------------------------------
#if defined(__CUDACC__)

// Shuffles any trivially copyable value between lanes, one 32-bit word at a time.
template <class T>
__device__ inline T shfl_xor_any(T v, int lane_mask) {
  constexpr int kWords = (sizeof(T) + 3) / 4;
  uint32_t w[kWords] = {};
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], lane_mask);
  T out;
  memcpy(&out, w, sizeof(T));
  return out;
}

// Butterfly over the 32 lanes of a full warp; every lane ends with the warp's result.
template <class Op, class T>
__device__ inline T warp_reduce(T v) {
#pragma unroll
  for (int mask = kWarp / 2; mask > 0; mask >>= 1) v = Op::combine(v, shfl_xor_any(v, mask));
  return v;
}

// Reduces one value per thread of the block (blockDim.x a multiple of 32, at most 1024); the
// result is valid in every thread of warp 0 (thread 0 usually writes it). `scratch` holds 32
// values of T in shared memory. Ends with a __syncthreads, so scratch can be reused.
template <class Op, class T>
__device__ inline T block_reduce(T v, T* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_reduce<Op>(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : Op::identity();
    v = warp_reduce<Op>(v);
  }
  __syncthreads();
  return v;
}

#endif  // __CUDACC__

// --- host emulation -------------------------------------------------------------------------------

// What warp_reduce leaves in lane 0 for the 32 lanes' values, in the device's order.
template <class Op, class T>
T emulate_warp_reduce(const T* lanes) {
  T v[kWarp];
  for (int l = 0; l < kWarp; ++l) v[l] = lanes[l];
  for (int mask = kWarp / 2; mask > 0; mask >>= 1) {
    T next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = Op::combine(v[l], v[l ^ mask]);
    for (int l = 0; l < kWarp; ++l) v[l] = next[l];
  }
  return v[0];
}

// What block_reduce returns for one value per thread (threads.size() a multiple of 32, at most
// 1024), in the device's order.
template <class Op, class T>
T emulate_block_reduce(const std::vector<T>& threads) {
  const int n = static_cast<int>(threads.size());
  const int warps = n / kWarp;
  T partial[kWarp];
  for (int w = 0; w < kWarp; ++w)
    partial[w] = w < warps ? emulate_warp_reduce<Op>(threads.data() + w * kWarp) : Op::identity();
  return emulate_warp_reduce<Op>(partial);
}

}  // namespace brisk::kernels::device
