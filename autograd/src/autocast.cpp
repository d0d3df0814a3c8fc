// The autocast policy applied to op inputs.
#include "brisk/autograd/autocast.h"

#include "brisk/autograd/ops_shape.h"

namespace brisk::autograd {

Tensor autocast(const Tensor& t, AutocastCategory category) {
  AutocastState s = autocast_state();
  if (!s.enabled || !t.defined() || !t.is_floating_point() || t.dtype() == DType::F64) return t;
  DType target = category == AutocastCategory::LowerPrecision ? s.dtype : DType::F32;
  return t.dtype() == target ? t : brisk::to(t, target);
}

}  // namespace brisk::autograd
