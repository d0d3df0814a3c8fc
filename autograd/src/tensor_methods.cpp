// The Tensor methods core declares for convenience ([autograd] in tensor.h), defined here
// where the graph lives. Core itself never calls them.
#include "brisk/autograd/engine.h"
#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_reduce.h"
#include "brisk/autograd/ops_shape.h"

namespace brisk {

using autograd::meta;

bool Tensor::requires_grad() const {
  return autograd::requires_grad(*this);
}

Tensor& Tensor::requires_grad_(bool flag) {
  autograd::AutogradMeta* m = meta(*this, true);
  BRISK_CHECK(!m->grad_fn || flag, "requires_grad_: cannot turn off requires_grad on a non-leaf tensor; use detach()");
  BRISK_CHECK(!flag || is_floating_point(), "requires_grad_: only floating-point tensors can require gradients, got ",
              dtype_name(dtype()));
  m->requires_grad = flag;
  return *this;
}

Tensor Tensor::grad() const {
  autograd::AutogradMeta* m = meta(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  BRISK_CHECK(!g.defined() || g.sizes() == sizes(), "set_grad: gradient shape ", g.sizes(),
              " does not match tensor shape ", sizes());
  meta(*this, true)->grad = g;
}

bool Tensor::is_leaf() const {
  autograd::AutogradMeta* m = meta(*this);
  return !m || !m->grad_fn;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, grad.defined() ? std::vector<Tensor>{grad} : std::vector<Tensor>{}, retain_graph);
}

void Tensor::register_hook(std::function<void(const Tensor&)> fn) const {
  BRISK_CHECK(requires_grad() && is_leaf(),
              "register_hook: hooks fire when a leaf's gradient is final; tensor of shape ", sizes(), " is ",
              requires_grad() ? "not a leaf" : "not requiring grad");
  meta(*this, true)->hooks.push_back(std::move(fn));
}

void Tensor::retain_grad() const {
  BRISK_CHECK(requires_grad(), "retain_grad: tensor does not require grad");
  autograd::AutogradMeta* m = meta(*this, true);
  if (!m->grad_fn || m->retains_grad) return;
  m->retains_grad = true;
  m->grad_fn->retained.emplace_back(m->output_nr, impl_ptr());
}

Tensor Tensor::view(const Shape& s) const {
  return brisk::view(*this, s);
}
Tensor Tensor::reshape(const Shape& s) const {
  return brisk::reshape(*this, s);
}
Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  return brisk::permute(*this, dims);
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  return brisk::transpose(*this, d0, d1);
}
Tensor Tensor::t() const {
  BRISK_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dims, got shape ", sizes());
  return dim() < 2 ? *this : brisk::transpose(*this, 0, 1);
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  return brisk::narrow(*this, d, start, length);
}
Tensor Tensor::select(int64_t d, int64_t index) const {
  return brisk::select(*this, d, index);
}
Tensor Tensor::expand(const Shape& s) const {
  return brisk::expand(*this, s);
}
Tensor Tensor::squeeze(int64_t d) const {
  return brisk::squeeze(*this, d);
}
Tensor Tensor::unsqueeze(int64_t d) const {
  return brisk::unsqueeze(*this, d);
}
Tensor Tensor::flatten(int64_t s, int64_t e) const {
  return brisk::flatten(*this, s, e);
}
Tensor Tensor::contiguous() const {
  return brisk::contiguous(*this);
}
Tensor Tensor::clone() const {
  return brisk::clone(*this);
}
Tensor Tensor::to(DType dt) const {
  return brisk::to(*this, dt);
}
Tensor Tensor::to(Device d, bool non_blocking) const {
  return brisk::to(*this, d, non_blocking);
}
Tensor Tensor::sum() const {
  return brisk::sum(*this);
}
Tensor Tensor::mean() const {
  return brisk::mean(*this);
}

}  // namespace brisk
