// Inputs of the attention tests: f32 values i / 32 with |i| <= 32, exact in f16 and bf16, so
// every dtype attends over the same numbers and one CPU reference serves them all.
#pragma once
#include <brisk/brisk.h>

#include <random>
#include <vector>

namespace brisk::testing {

inline Tensor exact_input(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(-32, 32);
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(dist(rng)) / 32.f;
  return from_vector(v, s);
}

}  // namespace brisk::testing
