// Differentiable reductions, cumsum, topk and softmax: compute through kernels, record a node
// whose backward calls kernels directly. Reduced gradients are viewed in keepdim form so they
// broadcast against the input.
#include "brisk/autograd/ops_reduce.h"

#include <algorithm>

#include "brisk/autograd/autocast.h"
#include "brisk/autograd/node.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/reduce.h"
#include "kernel_calls.h"

namespace brisk {

using autograd::detail::kdiv;
using autograd::detail::kmul;
using autograd::detail::scalar_like;

using autograd::GradCtx;
using autograd::record;
using kernels::BinaryOp;
using kernels::CompareOp;

namespace {

// The output shape of reducing `in` over dims with keepdim = true (dims already validated by the kernel).
Shape keep_shape(const Shape& in, const std::vector<int64_t>& dims) {
  if (in.empty()) return in;
  Shape k = in;
  if (dims.empty()) std::fill(k.begin(), k.end(), 1);
  for (int64_t d : dims) k[wrap_dim(d, static_cast<int64_t>(in.size()), "reduce")] = 1;
  return k;
}

// t (same numel as kshape) viewed with the reduced dims kept as size 1.
Tensor as_keepdim(const Tensor& t, const Shape& kshape) {
  Tensor c = kernels::contiguous(t);
  return c.as_strided(kshape, contiguous_strides(kshape), c.offset());
}

Tensor ksub(const Tensor& a, const Tensor& b) {
  return kernels::binary(BinaryOp::Sub, a, b);
}

// g broadcast to `in` (a fresh contiguous tensor).
Tensor broadcast_grad(const Tensor& gk, const Shape& in) {
  Tensor out = empty(in, gk.dtype(), gk.device());
  kernels::copy_(out, gk);
  return out;
}

// amax/amin backward: the gradient is shared evenly by the elements equal to the result.
Tensor evenly_distribute(const Tensor& gk, const Tensor& x, const Tensor& outk, const std::vector<int64_t>& dims) {
  Tensor mask = kernels::cast(kernels::compare(CompareOp::Eq, x, outk), x.dtype());
  Tensor count = kernels::sum(mask, dims, /*keepdim=*/true);
  return kmul(mask, kdiv(gk, count));
}

template <bool Max>
Tensor extreme(const char* name, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  profiler::Scope prof_scope(name);
  Tensor out = Max ? kernels::amax(x, dims, keepdim) : kernels::amin(x, dims, keepdim);
  if (!autograd::any_requires_grad({&x})) return out;
  Shape ks = keep_shape(x.sizes(), dims);
  record(name, {x}, out,
         [x, dims, ks, o = out.detach()](const GradCtx& g) -> std::vector<Tensor> {
           return {evenly_distribute(as_keepdim(g.grad(), ks), x, as_keepdim(o, ks), dims)};
         },
         {x, out});
  return out;
}

// Records a node that sends the gradient of `r.values` to r.indices along dim.
ValuesIndices pick_along_dim(const char* name, const Tensor& x, ValuesIndices r, int64_t dim, bool keepdim) {
  if (!autograd::any_requires_grad({&x})) return r;
  Shape in = x.sizes();
  Shape ks = keepdim ? r.values.sizes() : keep_shape(in, {dim});
  record(name, {x}, {r.values, r.indices},
         [in, ks, dim, idx = as_keepdim(r.indices.detach(), ks)](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::take_along_dim_backward(as_keepdim(g.grad(0), ks), idx, dim, in)};
         },
         {r.indices});
  return r;
}

Tensor var_std(const char* name, const Tensor& x_in, const std::vector<int64_t>& dims, int64_t correction, bool keepdim,
               bool is_std) {
  profiler::Scope prof_scope(name);
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  Tensor out = is_std ? kernels::std(x, dims, correction, keepdim) : kernels::var(x, dims, correction, keepdim);
  if (!autograd::any_requires_grad({&x})) return out;
  Shape ks = keep_shape(x.sizes(), dims);
  const int64_t n = out.numel() ? x.numel() / out.numel() : 0;
  const double denom = static_cast<double>(std::max<int64_t>(0, n - correction));
  record(name, {x}, out,
         [x, dims, ks, denom, is_std, o = out.detach()](const GradCtx& g) -> std::vector<Tensor> {
           Tensor dev = ksub(x, kernels::mean(x, dims, /*keepdim=*/true));
           Tensor gk = as_keepdim(g.grad(), ks);
           if (!is_std) return {kmul(kernels::binary_scalar(BinaryOp::Mul, gk, 2.0 / denom), dev)};
           // d std = d var / (2 std); groups with std == 0 get 0 (their deviations are all 0).
           Tensor sk = as_keepdim(o, ks);
           Tensor safe = kernels::where(kernels::compare_scalar(CompareOp::Eq, sk, 0.0), scalar_like(sk, 1.0), sk);
           return {kmul(kdiv(kernels::binary_scalar(BinaryOp::Mul, gk, 1.0 / denom), safe), dev)};
         },
         {x, out});
  return out;
}

}  // namespace

Tensor sum(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) {
  profiler::Scope prof_scope("sum");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  Tensor out = kernels::sum(x, dims, keepdim);
  if (!autograd::any_requires_grad({&x})) return out;
  Shape in = x.sizes(), ks = keep_shape(in, dims);
  record("sum", {x}, out,
         [in, ks](const GradCtx& g) -> std::vector<Tensor> { return {broadcast_grad(as_keepdim(g.grad(), ks), in)}; });
  return out;
}

Tensor mean(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) {
  profiler::Scope prof_scope("mean");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  Tensor out = kernels::mean(x, dims, keepdim);
  if (!autograd::any_requires_grad({&x})) return out;
  Shape in = x.sizes(), ks = keep_shape(in, dims);
  const double n = out.numel() ? static_cast<double>(x.numel()) / static_cast<double>(out.numel()) : 1.0;
  record("mean", {x}, out, [in, ks, n](const GradCtx& g) -> std::vector<Tensor> {
    Tensor r = broadcast_grad(as_keepdim(g.grad(), ks), in);
    kernels::mul_scalar_(r, 1.0 / n);
    return {r};
  });
  return out;
}

Tensor prod(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  profiler::Scope prof_scope("prod");
  Tensor out = kernels::prod(x, dims, keepdim);
  if (!autograd::any_requires_grad({&x})) return out;
  Shape ks = keep_shape(x.sizes(), dims);
  record("prod", {x}, out,
         [x, dims, ks](const GradCtx& g) -> std::vector<Tensor> {
           // d/dx_i = product of the other elements: p1 / x1 with zeros replaced by 1 in x1, kept only
           // where the group has no zero, or where x_i is the group's only zero.
           Tensor z = kernels::compare_scalar(CompareOp::Eq, x, 0.0);
           Tensor x1 = kernels::where(z, scalar_like(x, 1.0), x);
           Tensor p1 = kernels::prod(x1, dims, /*keepdim=*/true);
           Tensor zc = kernels::sum(z, dims, /*keepdim=*/true);
           Tensor keep = kernels::where(z, kernels::compare_scalar(CompareOp::Eq, zc, 1.0),
                                        kernels::compare_scalar(CompareOp::Eq, zc, 0.0));
           Tensor others = kmul(kdiv(p1, x1), kernels::cast(keep, x.dtype()));
           return {kmul(as_keepdim(g.grad(), ks), others)};
         },
         {x});
  return out;
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme<true>("amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme<false>("amin", x, dims, keepdim);
}
Tensor max(const Tensor& x) {
  return extreme<true>("max", x, {}, false);
}
Tensor min(const Tensor& x) {
  return extreme<false>("min", x, {}, false);
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  return pick_along_dim("max", x, kernels::max(x, dim, keepdim), dim, keepdim);
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  return pick_along_dim("min", x, kernels::min(x, dim, keepdim), dim, keepdim);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return kernels::argmax(x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return kernels::argmin(x, dim, keepdim);
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return var_std("var", x, dims, correction, keepdim, false);
}
Tensor std_dev(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return var_std("std", x, dims, correction, keepdim, true);
}

Tensor logsumexp(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) {
  profiler::Scope prof_scope("logsumexp");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  Tensor out = kernels::logsumexp(x, dims, keepdim);
  if (!autograd::any_requires_grad({&x})) return out;
  Shape ks = keep_shape(x.sizes(), dims);
  record("logsumexp", {x}, out,
         [x, ks, o = out.detach()](const GradCtx& g) -> std::vector<Tensor> {
           Tensor p = kernels::unary(kernels::UnaryOp::Exp, ksub(x, as_keepdim(o, ks)));
           return {kmul(as_keepdim(g.grad(), ks), p)};
         },
         {x, out});
  return out;
}

Tensor cumsum(const Tensor& x_in, int64_t dim) {
  profiler::Scope prof_scope("cumsum");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  Tensor out = kernels::cumsum(x, dim);
  if (!autograd::any_requires_grad({&x})) return out;
  record("cumsum", {x}, out,
         [dim](const GradCtx& g) -> std::vector<Tensor> { return {kernels::cumsum(g.grad(), dim, /*reverse=*/true)}; });
  return out;
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return pick_along_dim("topk", x, kernels::topk(x, k, dim, largest, sorted), dim, /*keepdim=*/true);
}

Tensor softmax(const Tensor& x_in, int64_t dim) {
  profiler::Scope prof_scope("softmax");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  Tensor y = kernels::softmax(x, dim);
  if (!autograd::any_requires_grad({&x})) return y;
  record("softmax", {x}, y,
         [dim, ys = y.detach()](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::softmax_backward(g.grad(), ys, dim)};
         },
         {y});
  return y;
}

Tensor log_softmax(const Tensor& x_in, int64_t dim) {
  profiler::Scope prof_scope("log_softmax");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  Tensor y = kernels::log_softmax(x, dim);
  if (!autograd::any_requires_grad({&x})) return y;
  record("log_softmax", {x}, y,
         [dim, ys = y.detach()](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::log_softmax_backward(g.grad(), ys, dim)};
         },
         {y});
  return y;
}

}  // namespace brisk
