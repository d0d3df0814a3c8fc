// Half and BFloat16: exhaustive round trips, known rounding cases, and float -> 16-bit
// conversion checked against an independent reference that rounds in double arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include <brisk/core/half.h>

using namespace brisk;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t half_bits(float f) {
  return Half(f).bits;
}
uint16_t bf16_bits(float f) {
  return BFloat16(f).bits;
}
bool half_is_nan(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}
bool bf16_is_nan(uint16_t b) {
  return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0;
}

// Reference float -> half: round |f| to the binary16 grid in double arithmetic with
// nearbyint (ties to even under the default rounding mode), then encode the exact result.
uint16_t ref_float_to_half(float f) {
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7e00;  // any NaN: only NaN-ness is compared
  double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0) return sign;
  int ex;
  std::frexp(a, &ex);                        // a = m * 2^ex, m in [0.5, 1)
  int e = std::max(ex - 1, -14);             // binary16 exponent (subnormals share -14)
  double quantum = std::ldexp(1.0, e - 10);  // spacing of binary16 values near a
  double r = std::nearbyint(a / quantum) * quantum;
  if (r > 65504.0) return sign | 0x7c00;
  if (r < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(r / std::ldexp(1.0, -24));
  double m = std::frexp(r, &ex);
  auto frac = static_cast<uint16_t>((m * 2.0 - 1.0) * 1024.0);
  return sign | static_cast<uint16_t>((ex - 1 + 15) << 10) | frac;
}

// Reference float -> bf16 the same way (8 significant bits, float's exponent range).
uint16_t ref_float_to_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  double a = std::fabs(static_cast<double>(f));
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isinf(a)) return sign | 0x7f80;
  if (a == 0) return sign;
  int ex;
  std::frexp(a, &ex);
  int e = std::max(ex - 1, -126);
  double quantum = std::ldexp(1.0, e - 7);
  double r = std::nearbyint(a / quantum) * quantum;
  const double bf16_max = (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127);
  if (r > bf16_max) return sign | 0x7f80;
  return sign | static_cast<uint16_t>(bits_of(static_cast<float>(r)) >> 16);  // r is exact in float
}

// Reference half -> float by the formula (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
double ref_half_to_double(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

}  // namespace

TEST(Half, EveryBitPatternRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    auto h = static_cast<uint16_t>(b);
    float f = Half::from_bits(h);
    uint16_t back = half_bits(f);
    if (half_is_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(half_is_nan(back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << "NaN sign kept " << std::hex << b;
    } else {
      ASSERT_EQ(back, h) << std::hex << b;
    }
  }
}

TEST(Half, EveryFiniteBitPatternDecodesToItsFormulaValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    auto h = static_cast<uint16_t>(b);
    if (((h >> 10) & 0x1f) == 0x1f) continue;
    ASSERT_EQ(static_cast<double>(static_cast<float>(Half::from_bits(h))), ref_half_to_double(h)) << std::hex << b;
  }
  EXPECT_EQ(static_cast<float>(Half::from_bits(0x7c00)), std::numeric_limits<float>::infinity());
  EXPECT_EQ(static_cast<float>(Half::from_bits(0xfc00)), -std::numeric_limits<float>::infinity());
}

TEST(Half, RoundsKnownValuesToNearestEven) {
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-2.0f), 0xc000);
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);    // largest finite
  EXPECT_EQ(half_bits(65519.996f), 0x7bff);  // just below the overflow tie
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);    // tie with 65536 rounds to even: inf
  EXPECT_EQ(half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie to even 0
  EXPECT_EQ(half_bits(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);  // just above the tie
  EXPECT_EQ(half_bits(3 * std::ldexp(1.0f, -26)), 0x0001);                    // 0.75 ulp rounds up to 1 ulp
  EXPECT_EQ(half_bits(3 * std::ldexp(1.0f, -25)), 0x0002);                    // 1.5 ulp: tie to even 2
  EXPECT_EQ(half_bits(5 * std::ldexp(1.0f, -25)), 0x0002);                    // 2.5 ulp: tie to even 2
  EXPECT_EQ(half_bits(2047 * std::ldexp(1.0f, -25)), 0x0400);                 // 1023.5 ulp: carries into the normals
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);                        // smallest normal
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);                 // tie, even stays
  EXPECT_EQ(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);             // tie, odd rounds up
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(half_bits(2047.5f), 0x6800);  // tie between 2047 and 2048 (even)
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_TRUE(half_is_nan(half_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(half_bits(float_of(0x7f800001u))));  // payload only in low bits stays NaN
  EXPECT_TRUE(half_is_nan(half_bits(float_of(0xffc00000u))));
}

TEST(Half, FloatToHalfMatchesDoubleReferenceOnMillionsOfFloats) {
  std::mt19937 rng(12345);
  // Half of the draws are uniform over all bit patterns (every exponent, NaN, inf); half
  // concentrate on the exponents where binary16 is finite or subnormal, and their neighbours.
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_int_distribution<uint32_t> exp_in_range(100, 145), mant(0, 0x7fffff), sign(0, 1);
  for (int i = 0; i < 4'000'000; ++i) {
    uint32_t u = (i & 1) ? any_bits(rng) : (sign(rng) << 31) | (exp_in_range(rng) << 23) | mant(rng);
    float f = float_of(u);
    uint16_t got = half_bits(f), want = ref_float_to_half(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(half_is_nan(got)) << std::hex << u;
    } else {
      ASSERT_EQ(got, want) << "float bits 0x" << std::hex << u << " (" << f << ")";
    }
  }
}

TEST(Half, ExactTiesBetweenNeighboursRoundToEven) {
  // The midpoint of every pair of adjacent finite halves (exact in float) rounds to the even one.
  for (uint32_t b = 0; b < 0x7bff; ++b) {
    double lo = ref_half_to_double(static_cast<uint16_t>(b)), hi = ref_half_to_double(static_cast<uint16_t>(b + 1));
    auto mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    uint16_t even = (b & 1) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
    ASSERT_EQ(half_bits(mid), even) << std::hex << b;
    ASSERT_EQ(half_bits(-mid), even | 0x8000) << std::hex << b;
  }
}

TEST(BFloat16, EveryBitPatternRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 65536; ++b) {
    auto h = static_cast<uint16_t>(b);
    float f = BFloat16::from_bits(h);
    ASSERT_EQ(bits_of(f), static_cast<uint32_t>(h) << 16) << std::hex << b;  // bf16 is float's top half
    uint16_t back = bf16_bits(f);
    if (bf16_is_nan(h)) {
      ASSERT_TRUE(bf16_is_nan(back)) << std::hex << b;
    } else {
      ASSERT_EQ(back, h) << std::hex << b;
    }
  }
}

TEST(BFloat16, RoundsKnownValuesToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even stays
  EXPECT_EQ(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -23)), 0x3f81);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // beyond the largest bf16: inf
  EXPECT_EQ(bf16_bits(float_of(0x7f7f7fffu)), 0x7f7f);              // just below that tie
  EXPECT_EQ(bf16_bits(float_of(0x00008000u)), 0x0000);              // subnormal tie to even
  EXPECT_EQ(bf16_bits(float_of(0x00018000u)), 0x0002);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_TRUE(bf16_is_nan(bf16_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(bf16_is_nan(bf16_bits(float_of(0x7f800001u))));  // must not collapse to inf
  EXPECT_TRUE(bf16_is_nan(bf16_bits(float_of(0xff800001u))));
}

TEST(BFloat16, FloatToBf16MatchesDoubleReferenceOnMillionsOfFloats) {
  std::mt19937 rng(54321);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 3'000'000; ++i) {
    uint32_t u = any_bits(rng);
    if (i % 3 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exact ties
    float f = float_of(u);
    uint16_t got = bf16_bits(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(bf16_is_nan(got)) << std::hex << u;
    } else {
      ASSERT_EQ(got, ref_float_to_bf16(f)) << "float bits 0x" << std::hex << u;
    }
  }
}

TEST(Half, ConversionsAreImplicitLikeAFloatType) {
  Half h = 0.5f;
  BFloat16 b = 0.25f;
  float sum = h + b;  // both convert to float
  EXPECT_EQ(sum, 0.75f);
  EXPECT_EQ(sizeof(Half), 2u);
  EXPECT_EQ(sizeof(BFloat16), 2u);
}
