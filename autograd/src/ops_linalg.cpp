// matmul and linear: forward through the kernels' GEMM, backward as two more products on
// transposed views (read in place by the GEMM, never copied).
#include "brisk/autograd/ops_linalg.h"

#include "brisk/autograd/autocast.h"
#include "brisk/autograd/node.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/linalg.h"

namespace brisk {

using autograd::GradCtx;
using autograd::record;

namespace {

// The transpose of the last two dims, as a view.
Tensor mT(const Tensor& t) {
  ViewMeta m = transpose_meta(t.sizes(), t.strides(), t.offset(), -2, -1);
  return t.as_strided(m.sizes, m.strides, m.offset);
}

// t with new sizes, as a view when its strides allow it, else as a contiguous copy.
Tensor reshaped(const Tensor& t, const Shape& sizes) {
  Strides st;
  if (compute_view_strides(t.sizes(), t.strides(), sizes, st)) return t.as_strided(sizes, st, t.offset());
  Tensor c = kernels::contiguous(t);
  return c.as_strided(sizes, contiguous_strides(sizes), c.offset());
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  profiler::Scope prof_scope("matmul");
  const Tensor a = autograd::autocast(a_in, AutocastCategory::LowerPrecision);
  const Tensor b = autograd::autocast(b_in, AutocastCategory::LowerPrecision);
  Tensor out = kernels::matmul(a, b);
  if (!autograd::any_requires_grad({&a, &b})) return out;
  record("matmul", {a, b}, out,
         [a, b](const GradCtx& g) -> std::vector<Tensor> {
           // Work on >= 2-D operands: a 1-D a is a (1, K) row, a 1-D b a (K, 1) column.
           Tensor a2 = a.dim() == 1 ? reshaped(a, {1, a.size(0)}) : a;
           Tensor b2 = b.dim() == 1 ? reshaped(b, {b.size(0), 1}) : b;
           const int64_t M = a2.size(-2), N = b2.size(-1);
           // The gradient in the (batch..., M, N) form of the product.
           Shape full(g.grad().sizes());
           if (a.dim() == 1) full.insert(full.end() - (b.dim() > 1 ? 1 : 0), M);
           if (b.dim() == 1) full.push_back(N);
           Tensor g2 = reshaped(g.grad(), full);
           Tensor ga, gb;
           if (g.needs(0)) {
             ga = autograd::sum_to(kernels::matmul(g2, mT(b2)), a2.sizes());
             ga = reshaped(ga, a.sizes());
           }
           if (g.needs(1)) {
             if (b2.dim() == 2 && a2.dim() > 2) {
               // b is shared by the whole batch: one (K, rows) x (rows, N) product over every row.
               const int64_t K = a2.size(-1), rows = a2.numel() / std::max<int64_t>(K, 1);
               gb = kernels::matmul(mT(reshaped(a2, {rows, K})), reshaped(g2, {rows, N}));
             } else {
               gb = autograd::sum_to(kernels::matmul(mT(a2), g2), b2.sizes());
             }
             gb = reshaped(gb, b.sizes());
           }
           return {ga, gb};
         },
         {a, b});
  return out;
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  profiler::Scope prof_scope("linear");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::LowerPrecision);
  const Tensor weight = autograd::autocast(weight_in, AutocastCategory::LowerPrecision);
  const Tensor bias = autograd::autocast(bias_in, AutocastCategory::LowerPrecision);
  Tensor out = kernels::linear(x, weight, bias);
  if (!autograd::any_requires_grad({&x, &weight, &bias})) return out;
  record("linear", {x, weight, bias}, out,
         [x, weight](const GradCtx& g) -> std::vector<Tensor> {
           const int64_t in = weight.size(1), outf = weight.size(0);
           const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
           Tensor g2 = reshaped(g.grad(), {rows, outf});
           Tensor gx, gw, gb;
           if (g.needs(0)) gx = reshaped(kernels::matmul(g2, weight), x.sizes());  // g W
           if (g.needs(1)) gw = kernels::matmul(mT(g2), reshaped(x, {rows, in}));  // g^T x
           // Column sums as a ones-vector product: no transposed copy of the gradient.
           if (g.needs(2)) gb = kernels::matmul(full({rows}, 1.0, {g2.dtype(), g2.device()}), g2);
           return {gx, gw, gb};
         },
         {x, weight});
  return out;
}

}  // namespace brisk
