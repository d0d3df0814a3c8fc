// Loads and stores between storage types and the types kernels compute in, for host and
// device. 16-bit floats compute in float (acc_t); on the GPU the conversions use the hardware's
// round-to-nearest-even instructions, which give the same bits as the host's software
// conversion (brisk/core/half.h) for every non-NaN value; NaN stays NaN.
#pragma once
#include <cstdint>
#include <type_traits>

#include "brisk/core/dtype.h"
#include "brisk/core/float_to_integer.h"
#include "brisk/core/half.h"
#include "brisk/core/macros.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace brisk::kernels::device {

template <class T>
BRISK_HOST_DEVICE inline acc_t<T> to_acc(T v) {
  return static_cast<acc_t<T>>(v);
}
template <>
BRISK_HOST_DEVICE inline float to_acc<Half>(Half v) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(v.bits));
#else
  return static_cast<float>(v);
#endif
}
template <>
BRISK_HOST_DEVICE inline float to_acc<BFloat16>(BFloat16 v) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
#else
  return static_cast<float>(v);
#endif
}

// acc (or any arithmetic value) -> T, rounding to nearest even for the 16-bit floats.
template <class T, class A>
BRISK_HOST_DEVICE inline T from_acc(A v) {
  if constexpr (std::is_same_v<T, Half>) {
#if defined(__CUDA_ARCH__)
    return Half::from_bits(__half_as_ushort(__float2half_rn(static_cast<float>(v))));
#else
    return Half(static_cast<float>(v));
#endif
  } else if constexpr (std::is_same_v<T, BFloat16>) {
#if defined(__CUDA_ARCH__)
    return BFloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(v))));
#else
    return BFloat16(static_cast<float>(v));
#endif
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != A(0);
  } else if constexpr (std::is_integral_v<T> && std::is_floating_point_v<A>) {
    return float_to_integer<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// Any storage type -> any other, through the source's compute type (what copy/cast do).
template <class To, class From>
BRISK_HOST_DEVICE inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else {
    return from_acc<To>(to_acc<From>(v));
  }
}

}  // namespace brisk::kernels::device
