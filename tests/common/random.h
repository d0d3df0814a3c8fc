// Test helper: a tensor of seeded standard-normal values (float64 unless asked), the input most
// gradient and kernel tests start from. One definition for every test file, so the files of a
// unity batch (tests/CMakeLists.txt) do not each carry their own.
#pragma once
#include <brisk/brisk.h>

#include <cstdint>

namespace brisk::testing {

inline Tensor seeded_randn(const Shape& shape, uint64_t seed, DType dtype = DType::F64) {
  Generator gen(seed);
  return randn(shape, {.dtype = dtype}, &gen);
}

}  // namespace brisk::testing
