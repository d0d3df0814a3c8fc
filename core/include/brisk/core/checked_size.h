// Overflow-checked size arithmetic for shapes and counts that come from outside the program (file
// headers, checkpoints): every reader of untrusted bytes validates a shape here before it builds a
// tensor, so that no later size, stride or byte-offset computation can overflow.
#pragma once
#include <cstdint>
#include <string_view>

#include "brisk/core/shape.h"

namespace brisk {

// The most dimensions a shape read from a file may have.
inline constexpr size_t kMaxUntrustedDims = 64;

// Checks a shape read from untrusted input for a tensor of `itemsize`-byte elements: at most
// kMaxUntrustedDims dims, every size non-negative, and the element count, every contiguous
// stride and every byte extent (sizes with zeros counted as ones, times itemsize) fit int64, so
// that shapes such as [0, 2^32, 2^32] are refused although they hold no element. Returns the
// byte size (numel * itemsize); throws brisk::Error "<what>: shape [...] ..." otherwise.
int64_t checked_nbytes(const Shape& sizes, int64_t itemsize, std::string_view what);

// a * b and a + b for counts read from untrusted input; throw "<what>: ... overflows" otherwise.
uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what);
uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what);

}  // namespace brisk
