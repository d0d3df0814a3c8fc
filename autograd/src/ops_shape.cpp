// Views record a node whose backward maps the gradient back to the input's layout.
#include "brisk/autograd/ops_shape.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "brisk/autograd/node.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"

namespace brisk {

using autograd::GradCtx;
using autograd::record;

namespace {

Tensor make_view(const Tensor& x, const ViewMeta& m) {
  return x.as_strided(m.sizes, m.strides, m.offset);
}

// Scatters a view's gradient into a zero tensor shaped like the input (narrow, select, slice).
Tensor grad_through_view(const Tensor& g, const Shape& in_sizes, DType dt, Device dev,
                         const std::function<Tensor(const Tensor&)>& view_of) {
  Tensor z = zeros(in_sizes, {dt, dev});
  kernels::copy_(view_of(z), g);
  return z;
}

}  // namespace

Tensor view(const Tensor& x, const Shape& sizes) {
  Shape target = infer_size(sizes, x.numel(), "view");
  Strides st;
  BRISK_CHECK(compute_view_strides(x.sizes(), x.strides(), target, st), "view: shape ", sizes,
              " is not compatible with the input's size ", x.sizes(), " and strides ", x.strides(),
              " (at least one dimension spans across two contiguous subspaces); use reshape instead");
  Tensor out = x.as_strided(target, st, x.offset());
  record("view", {x}, out,
         [in = x.sizes()](const GradCtx& g) -> std::vector<Tensor> { return {reshape(g.grad(), in)}; });
  return out;
}

Tensor reshape(const Tensor& x, const Shape& sizes) {
  Shape target = infer_size(sizes, x.numel(), "reshape");
  Strides st;
  if (compute_view_strides(x.sizes(), x.strides(), target, st)) return view(x, target);
  return view(contiguous(x), target);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor out = make_view(x, permute_meta(x.sizes(), x.strides(), x.offset(), dims));
  const int64_t n = x.dim();
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) inverse[wrap_dim(dims[i], n, "permute")] = i;
  record("permute", {x}, out,
         [inverse](const GradCtx& g) -> std::vector<Tensor> { return {permute(g.grad(), inverse)}; });
  return out;
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  Tensor out = make_view(x, transpose_meta(x.sizes(), x.strides(), x.offset(), d0, d1));
  record("transpose", {x}, out,
         [d0, d1](const GradCtx& g) -> std::vector<Tensor> { return {transpose(g.grad(), d0, d1)}; });
  return out;
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  Tensor out = make_view(x, narrow_meta(x.sizes(), x.strides(), x.offset(), dim, start, length));
  record("narrow", {x}, out, [in = x.sizes(), dim, start, length](const GradCtx& g) -> std::vector<Tensor> {
    return {grad_through_view(g.grad(), in, g.grad().dtype(), g.grad().device(),
                              [&](const Tensor& z) { return narrow(z, dim, start, length); })};
  });
  return out;
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  BRISK_CHECK(x.dim() > 0, "slice: cannot slice a 0-dim tensor");
  dim = wrap_dim(dim, x.dim(), "slice");
  BRISK_CHECK(step >= 1, "slice: step must be positive, got ", step);
  const int64_t size = x.size(dim);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sz = x.sizes();
  Strides st = x.strides();
  sz[dim] = (end - start + step - 1) / step;
  st[dim] *= step;
  Tensor out = x.as_strided(sz, st, x.offset() + start * x.stride(dim));
  record("slice", {x}, out, [in = x.sizes(), dim, start, end, step](const GradCtx& g) -> std::vector<Tensor> {
    return {grad_through_view(g.grad(), in, g.grad().dtype(), g.grad().device(),
                              [&](const Tensor& z) { return slice(z, dim, start, end, step); })};
  });
  return out;
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  Tensor out = make_view(x, select_meta(x.sizes(), x.strides(), x.offset(), dim, index));
  record("select", {x}, out, [in = x.sizes(), dim, index](const GradCtx& g) -> std::vector<Tensor> {
    return {grad_through_view(g.grad(), in, g.grad().dtype(), g.grad().device(),
                              [&](const Tensor& z) { return select(z, dim, index); })};
  });
  return out;
}

Tensor expand(const Tensor& x, const Shape& sizes) {
  Tensor out = make_view(x, expand_meta(x.sizes(), x.strides(), x.offset(), sizes));
  record("expand", {x}, out,
         [in = x.sizes()](const GradCtx& g) -> std::vector<Tensor> { return {autograd::sum_to(g.grad(), in)}; });
  return out;
}

Tensor broadcast_to(const Tensor& x, const Shape& sizes) {
  BRISK_CHECK(broadcast_shapes(x.sizes(), sizes, "broadcast_to") == sizes, "broadcast_to: cannot broadcast shape ",
              x.sizes(), " to ", sizes);
  return expand(x, sizes);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  Tensor out = make_view(x, squeeze_meta(x.sizes(), x.strides(), x.offset(), dim));
  record("squeeze", {x}, out,
         [in = x.sizes()](const GradCtx& g) -> std::vector<Tensor> { return {reshape(g.grad(), in)}; });
  return out;
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  Tensor out = make_view(x, unsqueeze_meta(x.sizes(), x.strides(), x.offset(), dim));
  record("unsqueeze", {x}, out,
         [in = x.sizes()](const GradCtx& g) -> std::vector<Tensor> { return {reshape(g.grad(), in)}; });
  return out;
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  BRISK_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape s;
  for (int64_t d = 0; d < start_dim; ++d) s.push_back(x.size(d));
  int64_t m = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) m *= x.size(d);
  s.push_back(m);
  for (int64_t d = end_dim + 1; d < x.dim(); ++d) s.push_back(x.size(d));
  return reshape(x, s);
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  dim = wrap_dim(dim, x.dim(), "unflatten");
  Shape inner = infer_size(sizes, x.size(dim), "unflatten");
  Shape s(x.sizes().begin(), x.sizes().begin() + dim);
  s.insert(s.end(), inner.begin(), inner.end());
  s.insert(s.end(), x.sizes().begin() + dim + 1, x.sizes().end());
  return view(x, s);
}

Tensor contiguous(const Tensor& x) {
  profiler::Scope prof_scope("contiguous");
  if (x.is_contiguous()) return x;
  Tensor out = kernels::contiguous(x);
  record("contiguous", {x}, out, [](const GradCtx& g) -> std::vector<Tensor> { return {g.grad()}; });
  return out;
}

Tensor clone(const Tensor& x) {
  profiler::Scope prof_scope("clone");
  Tensor out = kernels::cast(x, x.dtype());
  record("clone", {x}, out, [](const GradCtx& g) -> std::vector<Tensor> { return {g.grad()}; });
  return out;
}

Tensor to(const Tensor& x, DType dtype) {
  profiler::Scope prof_scope("to");
  if (x.dtype() == dtype) return x;
  Tensor out = kernels::cast(x, dtype);
  DType in = x.dtype();
  record("to", {x}, out, [in](const GradCtx& g) -> std::vector<Tensor> { return {kernels::cast(g.grad(), in)}; });
  return out;
}

Tensor to(const Tensor& x, Device device, bool non_blocking) {
  profiler::Scope prof_scope("to");
  if (x.device() == device) return x;
  Tensor out = kernels::to_device(x, device, non_blocking);
  Device in = x.device();
  record("to", {x}, out, [in](const GradCtx& g) -> std::vector<Tensor> { return {kernels::to_device(g.grad(), in)}; });
  return out;
}

}  // namespace brisk
