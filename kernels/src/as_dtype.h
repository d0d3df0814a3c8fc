// t in dtype dt: t itself when it already is (or is undefined: an optional operand), else a
// cast copy. One definition for the kernels' dispatch files, which a unity batch may hold together.
#pragma once
#include "brisk/core/tensor.h"
#include "brisk/kernels/elementwise.h"

namespace brisk::kernels::detail {

inline Tensor as_dtype(const Tensor& t, DType dt) {
  return !t.defined() || t.dtype() == dt ? t : cast(t, dt);
}

}  // namespace brisk::kernels::detail
