// The default generator.
#include "brisk/core/rng.h"

namespace brisk {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t first = offset_;
  offset_ += n;
  return first;
}

Generator::State Generator::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {seed_, offset_};
}

void Generator::set_state(State s) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = s.seed;
  offset_ = s.offset;
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) {
  default_generator().manual_seed(seed);
}

}  // namespace brisk
