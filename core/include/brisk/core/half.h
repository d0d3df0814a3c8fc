// Half (IEEE binary16) and BFloat16: 16-bit storage types. Arithmetic happens in float;
// float -> 16-bit conversion rounds to nearest, ties to even, and keeps NaN a NaN.
#pragma once
#include <cstdint>
#include <cstring>

#include "brisk/core/macros.h"

namespace brisk {

namespace detail {
BRISK_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
BRISK_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// float -> binary16 bits, round to nearest even (handles subnormals, overflow to inf, NaN).
BRISK_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (ax < 0x38800000u) {                                               // result is subnormal or zero
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);           // < 2^-25 rounds to 0
    uint32_t e = ax >> 23;                                              // biased exponent, 102..112
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;  // 14..24
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // normal: rebias exponent 127 -> 15, keep 10 mantissa bits, round to nearest even
  uint32_t r = ax - 0x38000000u;  // (127-15) << 23
  uint32_t q = r >> 13;
  uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

BRISK_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0x1fu) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    out = sign;
  } else {  // subnormal: normalise
    uint32_t e = 113u;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --e;
    }
    out = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return bits_float(out);
}

BRISK_HOST_DEVICE inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}
BRISK_HOST_DEVICE inline float bf16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}
}  // namespace detail

struct Half {
  uint16_t bits = 0;
  Half() = default;
  BRISK_HOST_DEVICE Half(float f) : bits(detail::float_to_half_bits(f)) {}  // NOLINT: implicit like a float type
  BRISK_HOST_DEVICE operator float() const { return detail::half_bits_to_float(bits); }  // NOLINT
  BRISK_HOST_DEVICE static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BRISK_HOST_DEVICE BFloat16(float f) : bits(detail::float_to_bf16_bits(f)) {}           // NOLINT
  BRISK_HOST_DEVICE operator float() const { return detail::bf16_bits_to_float(bits); }  // NOLINT
  BRISK_HOST_DEVICE static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace brisk
