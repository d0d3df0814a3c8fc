// Optimizers' autocast copies: a 16-bit copy of each f32 parameter, rewritten by every step, that
// autocast uses instead of casting the parameter in every forward (docs/tour/04-mixed-precision.md).
#include "brisk/autograd/autocast.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/optim/optimizer.h"

namespace brisk::optim {

void Optimizer::keep_autocast_copies(DType dtype) {
  BRISK_CHECK(dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F32, name(),
              "::keep_autocast_copies: dtype must be bf16 or f16 (f32 turns the copies off), got ", dtype_name(dtype));
  if (dtype == copies_dtype_) return;
  copies_dtype_ = dtype;
  copies_.clear();  // autograd holds them weakly: freed here, they are no longer served
}

Tensor Optimizer::autocast_copy(size_t i) {
  if (copies_dtype_ == DType::F32) return Tensor();
  if (copies_.size() != flat_params_.size()) copies_.resize(flat_params_.size());
  const Tensor& p = flat_params_[i];
  Tensor& c = copies_[i];
  if (p.dtype() != DType::F32) {
    c = Tensor();  // a parameter moved to another dtype (Module::to) drops its copy
    return c;
  }
  if (!c.defined() || c.sizes() != p.sizes() || c.device() != p.device()) {
    MemoryCategoryGuard category(MemoryCategory::OptimizerState);
    c = empty(p.sizes(), copies_dtype_, p.device());
  }
  return c;
}

void Optimizer::refresh_autocast_copies() {
  if (copies_dtype_ == DType::F32) return;
  for (size_t i = 0; i < flat_params_.size(); ++i) {
    const Tensor c = autocast_copy(i);
    if (!c.defined()) continue;
    const Tensor& p = flat_params_[i];
    if (autograd::current_autocast_copy(p, copies_dtype_).is_same(c)) continue;
    kernels::copy_(c, p);  // the cast kernel itself: the same bits as autocast's cast
    autograd::set_autocast_copy(p, c);
  }
}

}  // namespace brisk::optim
