// The Tensor methods core declares for convenience ([autograd] in tensor.h), defined here
// where the graph lives. Core itself never calls them.
#include "brisk/autograd/engine.h"
#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_elementwise.h"
#include "brisk/autograd/ops_index.h"
#include "brisk/autograd/ops_linalg.h"
#include "brisk/autograd/ops_reduce.h"
#include "brisk/autograd/ops_shape.h"

namespace brisk {

using autograd::meta;

namespace {
// Lets the factories honour TensorOptions::requires_grad (core cannot call into autograd).
const bool g_setter_registered = [] {
  register_requires_grad_setter([](const Tensor& t) { Tensor(t).requires_grad_(true); });
  return true;
}();
}  // namespace

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

// --- libtorch-style op methods: each is its free function -----------------------------
Tensor Tensor::abs() const {
  return brisk::abs(*this);
}
Tensor Tensor::neg() const {
  return brisk::neg(*this);
}
Tensor Tensor::exp() const {
  return brisk::exp(*this);
}
Tensor Tensor::log() const {
  return brisk::log(*this);
}
Tensor Tensor::log1p() const {
  return brisk::log1p(*this);
}
Tensor Tensor::sqrt() const {
  return brisk::sqrt(*this);
}
Tensor Tensor::rsqrt() const {
  return brisk::rsqrt(*this);
}
Tensor Tensor::square() const {
  return brisk::square(*this);
}
Tensor Tensor::pow(double exponent) const {
  return brisk::pow(*this, exponent);
}
Tensor Tensor::pow(const Tensor& exponent) const {
  return brisk::pow(*this, exponent);
}
Tensor Tensor::sin() const {
  return brisk::sin(*this);
}
Tensor Tensor::cos() const {
  return brisk::cos(*this);
}
Tensor Tensor::tanh() const {
  return brisk::tanh(*this);
}
Tensor Tensor::sigmoid() const {
  return brisk::sigmoid(*this);
}
Tensor Tensor::relu() const {
  return brisk::relu(*this);
}
Tensor Tensor::gelu(GeluApproximation approximate) const {
  return brisk::gelu(*this, approximate);
}
Tensor Tensor::silu() const {
  return brisk::silu(*this);
}
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  return brisk::clamp(*this, min, max);
}
Tensor Tensor::clamp_min(double min) const {
  return brisk::clamp(*this, min, std::nullopt);
}
Tensor Tensor::clamp_max(double max) const {
  return brisk::clamp(*this, std::nullopt, max);
}
Tensor Tensor::add(const Tensor& other, double alpha) const {
  return brisk::add(*this, other, alpha);
}
Tensor Tensor::add(double other) const {
  return *this + other;
}
Tensor Tensor::sub(const Tensor& other, double alpha) const {
  return alpha == 1.0 ? brisk::sub(*this, other) : brisk::add(*this, other, -alpha);
}
Tensor Tensor::sub(double other) const {
  return *this - other;
}
Tensor Tensor::mul(const Tensor& other) const {
  return brisk::mul(*this, other);
}
Tensor Tensor::mul(double other) const {
  return *this * other;
}
Tensor Tensor::div(const Tensor& other) const {
  return brisk::div(*this, other);
}
Tensor Tensor::div(double other) const {
  return *this / other;
}
Tensor Tensor::eq(const Tensor& other) const {
  return brisk::eq(*this, other);
}
Tensor Tensor::eq(double other) const {
  return brisk::eq(*this, other);
}
Tensor Tensor::ne(const Tensor& other) const {
  return brisk::ne(*this, other);
}
Tensor Tensor::ne(double other) const {
  return brisk::ne(*this, other);
}
Tensor Tensor::lt(const Tensor& other) const {
  return brisk::lt(*this, other);
}
Tensor Tensor::lt(double other) const {
  return brisk::lt(*this, other);
}
Tensor Tensor::le(const Tensor& other) const {
  return brisk::le(*this, other);
}
Tensor Tensor::le(double other) const {
  return brisk::le(*this, other);
}
Tensor Tensor::gt(const Tensor& other) const {
  return brisk::gt(*this, other);
}
Tensor Tensor::gt(double other) const {
  return brisk::gt(*this, other);
}
Tensor Tensor::ge(const Tensor& other) const {
  return brisk::ge(*this, other);
}
Tensor Tensor::ge(double other) const {
  return brisk::ge(*this, other);
}
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return brisk::where(condition, *this, other);
}
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  return brisk::masked_fill(*this, mask, value);
}

Tensor Tensor::sum() const {
  return brisk::sum(*this);
}
Tensor Tensor::sum(const DimList& dims, bool keepdim) const {
  return brisk::sum(*this, dims.vec(), keepdim);
}
Tensor Tensor::mean() const {
  return brisk::mean(*this);
}
Tensor Tensor::mean(const DimList& dims, bool keepdim) const {
  return brisk::mean(*this, dims.vec(), keepdim);
}
Tensor Tensor::prod(const DimList& dims, bool keepdim) const {
  return brisk::prod(*this, dims.vec(), keepdim);
}
Tensor Tensor::amax(const DimList& dims, bool keepdim) const {
  return brisk::amax(*this, dims.vec(), keepdim);
}
Tensor Tensor::amin(const DimList& dims, bool keepdim) const {
  return brisk::amin(*this, dims.vec(), keepdim);
}
Tensor Tensor::logsumexp(const DimList& dims, bool keepdim) const {
  return brisk::logsumexp(*this, dims.vec(), keepdim);
}
Tensor Tensor::var(const DimList& dims, int64_t correction, bool keepdim) const {
  return brisk::var(*this, dims.vec(), correction, keepdim);
}
Tensor Tensor::std(const DimList& dims, int64_t correction, bool keepdim) const {
  return brisk::std_dev(*this, dims.vec(), correction, keepdim);
}
Tensor Tensor::max() const {
  return brisk::max(*this);
}
Tensor Tensor::min() const {
  return brisk::min(*this);
}
ValuesIndices Tensor::max(int64_t dim, bool keepdim) const {
  return brisk::max(*this, dim, keepdim);
}
ValuesIndices Tensor::min(int64_t dim, bool keepdim) const {
  return brisk::min(*this, dim, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return brisk::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return brisk::argmin(*this, dim, keepdim);
}
Tensor Tensor::cumsum(int64_t dim) const {
  return brisk::cumsum(*this, dim);
}
Tensor Tensor::softmax(int64_t dim) const {
  return brisk::softmax(*this, dim);
}
Tensor Tensor::log_softmax(int64_t dim) const {
  return brisk::log_softmax(*this, dim);
}

Tensor Tensor::matmul(const Tensor& other) const {
  return brisk::matmul(*this, other);
}
Tensor Tensor::mm(const Tensor& other) const {
  BRISK_CHECK(dim() == 2 && other.dim() == 2, "mm: expects two 2-D tensors, got shapes ", sizes(), " and ",
              other.sizes(), " (use matmul for other ranks)");
  return brisk::matmul(*this, other);
}
Tensor Tensor::index_select(int64_t d, const Tensor& index) const {
  return brisk::index_select(*this, d, index);
}
Tensor Tensor::gather(int64_t d, const Tensor& index) const {
  return brisk::gather(*this, d, index);
}
Tensor Tensor::tril(int64_t diagonal) const {
  return brisk::tril(*this, diagonal);
}
Tensor Tensor::triu(int64_t diagonal) const {
  return brisk::triu(*this, diagonal);
}

const Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  return brisk::add_(*this, other, alpha);
}
const Tensor& Tensor::add_(double other) const {
  return brisk::add_(*this, other);
}
const Tensor& Tensor::sub_(const Tensor& other, double alpha) const {
  return brisk::sub_(*this, other, alpha);
}
const Tensor& Tensor::sub_(double other) const {
  return brisk::sub_(*this, other);
}
const Tensor& Tensor::mul_(const Tensor& other) const {
  return brisk::mul_(*this, other);
}
const Tensor& Tensor::mul_(double other) const {
  return brisk::mul_(*this, other);
}
const Tensor& Tensor::div_(const Tensor& other) const {
  return brisk::div_(*this, other);
}
const Tensor& Tensor::div_(double other) const {
  return brisk::div_(*this, other);
}
const Tensor& Tensor::zero_() const {
  return brisk::zero_(*this);
}
const Tensor& Tensor::fill_(double value) const {
  return brisk::fill_(*this, value);
}
const Tensor& Tensor::copy_(const Tensor& src) const {
  return brisk::copy_(*this, src);
}
const Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) const {
  return brisk::clamp_(*this, min, max);
}

}  // namespace brisk
