// The per-element values of arange and linspace, and how every factory stores a double in a
// tensor's dtype, written once for host and device: the CPU factories and the CUDA kernels call
// the same functions (with the same rounding: each product and sum fused into one fma, as GCC
// compiled these formulas for the CPU before they were shared), so the GPU makes the same values
// as the CPU bit for bit.
#pragma once
#include <cstdint>

#include "brisk/core/macros.h"
#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/random.h"

namespace brisk::kernels::device {

// A factory's double value in dtype T: converted to T's compute type first (f32 for f16/bf16,
// so a 16-bit value is rounded twice, as the CPU has always done), then stored.
template <class T>
BRISK_HOST_DEVICE inline T store_double(double v) {
  return from_acc<T>(static_cast<acc_t<T>>(v));
}

// arange: start + i * step.
struct ArangeValues {
  double start, step;
  BRISK_HOST_DEVICE double operator()(int64_t i) const { return fused_mul_add(static_cast<double>(i), step, start); }
};

// linspace: filled from both ends, as PyTorch does, so the first value is exactly start and the
// last exactly end.
struct LinspaceValues {
  double start, end;
  double step;    // (end - start) / (steps - 1), 0 for steps <= 1
  int64_t steps;  // number of values

  BRISK_HOST_DEVICE double operator()(int64_t i) const {
    if (i < steps / 2) return fused_mul_add(step, static_cast<double>(i), start);
    return fused_mul_add(-step, static_cast<double>(steps - 1 - i), end);
  }
};

}  // namespace brisk::kernels::device
