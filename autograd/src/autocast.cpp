// The autocast policy applied to op inputs, and the reuse of parameters' casts (the weight cache
// and optimizers' copies).
#include "brisk/autograd/autocast.h"

#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_shape.h"
#include "brisk/core/autocast_cache.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "reuse.h"

namespace brisk::autograd {

namespace {

// A parameter in PyTorch's sense for the cache: an f32 leaf that requires grad.
bool is_parameter(const Tensor& t) {
  if (t.dtype() != DType::F32) return false;
  const AutogradMeta* m = meta(t);
  return m && m->requires_grad && !m->grad_fn;
}

// `data` (param's values in data's dtype) as the output of a cast of param: a new handle on its
// bytes with its own "to" node, so every use has its own node and the gradient reaches param
// exactly as through brisk::to (each use's gradient cast to f32 and added into param's .grad).
Tensor as_cast_of(const Tensor& param, const Tensor& data) {
  Tensor out = detail::take_over(data);
  const DType in = param.dtype();
  record("to", {param}, out, [in](const GradCtx& g) -> std::vector<Tensor> { return {kernels::cast(g.grad(), in)}; });
  return out;
}

Tensor cast_parameter(const Tensor& param, DType dtype) {
  Tensor data = current_autocast_copy(param, dtype);
  if (!data.defined()) data = autocast_cache_find(param, dtype);
  if (!data.defined()) {
    // Its own profiler row, so a profile shows how many weight casts a step makes.
    profiler::Scope prof_scope("autocast_weight_cast");
    data = kernels::cast(param, dtype);
    autocast_cache_put(param, data);
  }
  return as_cast_of(param, data);
}

}  // namespace

Tensor autocast(const Tensor& t, AutocastCategory category) {
  AutocastState s = autocast_state();
  if (!s.enabled || !t.defined() || !t.is_floating_point() || t.dtype() == DType::F64) return t;
  DType target = category == AutocastCategory::LowerPrecision ? s.dtype : DType::F32;
  if (t.dtype() == target) return t;
  if (s.cache_enabled && target == s.dtype && is_parameter(t)) return cast_parameter(t, target);
  return brisk::to(t, target);
}

void set_autocast_copy(const Tensor& param, const Tensor& copy) {
  BRISK_CHECK(param.defined() && copy.defined(), "set_autocast_copy: undefined tensor");
  BRISK_CHECK((copy.dtype() == DType::BF16 || copy.dtype() == DType::F16) && copy.is_contiguous() &&
                  copy.sizes() == param.sizes() && copy.device() == param.device(),
              "set_autocast_copy: the copy must be a contiguous f16 or bf16 tensor shaped like the parameter ",
              param.sizes(), " on ", param.device().str(), "; got ", dtype_name(copy.dtype()), " ", copy.sizes(),
              " on ", copy.device().str());
  AutogradMeta* m = meta(param, true);
  m->autocast_copy = copy.impl_ptr();
  m->autocast_copy_stamp = TensorStamp(param);
}

Tensor current_autocast_copy(const Tensor& param, DType dtype) {
  const AutogradMeta* m = param.defined() ? meta(param) : nullptr;
  if (!m) return Tensor();
  std::shared_ptr<TensorImpl> copy = m->autocast_copy.lock();
  if (!copy || copy->dtype != dtype || !m->autocast_copy_stamp.matches(param)) return Tensor();
  return Tensor(std::move(copy));
}

}  // namespace brisk::autograd
