// Counter-based random numbers (Philox-4x32-10): the value at position i of a draw depends
// only on (seed, offset + i), so the same seed gives the same numbers on every device and
// every thread count.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>

#include "brisk/core/macros.h"

namespace brisk {

struct Philox {
  // Returns the 4 32-bit words for counter `ctr` under key `seed`.
  BRISK_HOST_DEVICE static void block(uint64_t seed, uint64_t ctr, uint32_t out[4]) {
    uint32_t c0 = static_cast<uint32_t>(ctr), c1 = static_cast<uint32_t>(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
      uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }
  // Uniform in [0, 1) with 24 bits of randomness.
  BRISK_HOST_DEVICE static float to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
  // Uniform in [0, 1) with 53 bits.
  BRISK_HOST_DEVICE static double to_unit_double(uint32_t a, uint32_t b) {
    uint64_t v = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
    return static_cast<double>(v & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
  }
};

// A seed and a counter; each draw of n values reserves counters [offset, offset + n).
class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }
  // Reserves n counters and returns the first one (thread-safe).
  uint64_t reserve(uint64_t n);
  struct State {
    uint64_t seed;
    uint64_t offset;
  };
  State state() const;
  void set_state(State s);

 private:
  mutable std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
// Seeds the default generator (what set_seed / torch.manual_seed do).
void manual_seed(uint64_t seed);

}  // namespace brisk
