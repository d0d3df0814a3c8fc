// Helpers shared by the CPU reduction kernels (reduce.cpp) and the along-one-dim kernels
// (softmax.cpp: softmax, cumsum, topk): accumulator types and lane sums.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "brisk/core/tensor.h"
#include "brisk/kernels/dispatch.h"
#include "cpu/fast_math.h"
#include "cpu/isa.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

// Sum accumulator: f64 for f32/f64 (cheap and far more accurate), f32 for f16/bf16, i64 for
// integers and bool.
template <class T>
using sum_acc_t =
    std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<std::is_floating_point_v<T>, double, float>>;

// v converted to A through its own accumulation type (Half/BFloat16 go through float).
template <class A, class T>
inline A load(T v) {
  return static_cast<A>(static_cast<acc_t<T>>(v));
}

// Sum of a contiguous run with 8 independent lanes combined in a fixed order: the compiler
// can vectorise it, and the result depends only on n.
template <class S, class T>
inline S sum_lanes(const T* p, int64_t n) {
  constexpr int L = 8;
  S lane[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) lane[l] += load<S>(p[i + l]);
  S s = S(0);
  for (int l = 0; l < L; ++l) s += lane[l];
  for (; i < n; ++i) s += load<S>(p[i]);
  return s;
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
