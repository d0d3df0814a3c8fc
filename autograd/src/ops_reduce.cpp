// Differentiable reductions.
#include "brisk/autograd/ops_reduce.h"

#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_shape.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/reduce.h"

namespace brisk {

using autograd::GradCtx;
using autograd::record;

namespace {

// The gradient of a reduction, reshaped to keepdim form and broadcast to the input's shape.
Tensor expand_reduced_grad(const Tensor& g, const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor gk = g;
  if (!keepdim) {
    Shape kshape = in;
    if (dims.empty()) {
      for (auto& s : kshape) s = 1;
    } else {
      for (int64_t d : dims) kshape[wrap_dim(d, static_cast<int64_t>(in.size()), "sum")] = 1;
    }
    Tensor gc = kernels::contiguous(g);
    gk = gc.as_strided(kshape, contiguous_strides(kshape), gc.offset());
  }
  Tensor out = empty(in, g.dtype(), g.device());
  kernels::copy_(out, gk);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = kernels::sum(x, dims, keepdim);
  Shape in = x.sizes();
  record("sum", {x}, out, [in, dims, keepdim](const GradCtx& g) -> std::vector<Tensor> {
    return {expand_reduced_grad(g.grad(), in, dims, keepdim)};
  });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = kernels::mean(x, dims, keepdim);
  Shape in = x.sizes();
  const double n = out.numel() ? static_cast<double>(x.numel()) / static_cast<double>(out.numel()) : 1.0;
  record("mean", {x}, out, [in, dims, keepdim, n](const GradCtx& g) -> std::vector<Tensor> {
    Tensor r = expand_reduced_grad(g.grad(), in, dims, keepdim);
    kernels::mul_scalar_(r, 1.0 / n);
    return {r};
  });
  return out;
}

}  // namespace brisk
