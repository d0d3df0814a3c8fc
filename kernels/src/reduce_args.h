// Argument checks shared by the public reduction and along-a-dim kernels (internal): dim
// wrapping, the float requirement, and which dims a reduction keeps.
#pragma once
#include <cstdint>
#include <vector>

#include "brisk/core/tensor.h"

namespace brisk::kernels::detail {

inline void require_float(const char* op, const Tensor& x) {
  BRISK_CHECK(x.is_floating_point(), op, ": expected a floating-point input, got ", dtype_name(x.dtype()), " of shape ",
              x.sizes());
}

// Wraps dim into [0, ndim) (a 0-dim tensor accepts 0 and -1); the error names op and shape.
inline int64_t wrap_dim_checked(const char* op, int64_t dim, const Tensor& x) {
  const int64_t nd = x.dim();
  const int64_t lo = nd == 0 ? -1 : -nd, hi = nd == 0 ? 0 : nd - 1;
  BRISK_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " out of range for input of shape ", x.sizes(), " (expected ",
              lo, "..", hi, ")");
  return dim < 0 ? dim + (nd == 0 ? 1 : nd) : dim;
}

// A reduction over `dims` of x: which dims are reduced (x.dim() flags), the output's shape
// (reduced dims dropped, or kept as 1 with keepdim) and the element counts.
struct Reduction {
  std::vector<bool> reduced;
  Shape out;
  int64_t n_out = 1, n_red = 1;
};

// Empty dims = all dims; negative dims wrap; a repeated dim is an error naming op and dims.
inline Reduction make_reduction(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t nd = x.dim();
  Reduction r;
  r.reduced.assign(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim_checked(op, d, x);
    if (nd == 0) continue;
    BRISK_CHECK(!r.reduced[w], op, ": dim ", d, " appears more than once in dims ", dims, " (input shape ", x.sizes(),
                ")");
    r.reduced[w] = true;
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (r.reduced[d]) {
      r.n_red *= x.size(d);
      if (keepdim) r.out.push_back(1);
    } else {
      r.n_out *= x.size(d);
      r.out.push_back(x.size(d));
    }
  }
  return r;
}

}  // namespace brisk::kernels::detail
