// Floating point -> integer conversion defined for every input, for the host and the device.
#pragma once
#include <cstdint>

#include "brisk/core/macros.h"

namespace brisk {

// Floating point -> integer, defined for every input (a plain cast is undefined behaviour out of
// the target's range): truncate toward zero as a cast does, NaN gives 0, values beyond int64
// saturate to its limits, then the int64 is narrowed modulo 2^bits. That is what PyTorch gives
// for uint8 (it converts through int64) and what x86 gives for int8/int16 (docs/how-brisk-works.md,
// "Casting").
template <class T, class A>
BRISK_HOST_DEVICE inline T float_to_integer(A v) {
  const double d = static_cast<double>(v);
  int64_t i = 0;
  if (d != d) {
    i = 0;
  } else if (d >= 9223372036854775808.0) {
    i = INT64_MAX;
  } else if (d <= -9223372036854775808.0) {
    i = INT64_MIN;
  } else {
    i = static_cast<int64_t>(d);
  }
  return static_cast<T>(i);
}

}  // namespace brisk
