// matmul and linear: forward through the kernels' GEMM, backward as two more products on
// transposed views (read in place by the GEMM, never copied). gelu_mlp: two linears and the GELU
// between them as one node, so GELU can ride in the products' epilogues both ways.
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
           Tensor a2 = a.dim() == 1 ? kernels::reshaped(a, {1, a.size(0)}) : a;
           Tensor b2 = b.dim() == 1 ? kernels::reshaped(b, {b.size(0), 1}) : b;
           const int64_t M = a2.size(-2), N = b2.size(-1);
           // The gradient in the (batch..., M, N) form of the product.
           Shape full(g.grad().sizes());
           if (a.dim() == 1) full.insert(full.end() - (b.dim() > 1 ? 1 : 0), M);
           if (b.dim() == 1) full.push_back(N);
           Tensor g2 = kernels::reshaped(g.grad(), full);
           Tensor ga, gb;
           if (g.needs(0)) {
             ga = autograd::sum_to(kernels::matmul(g2, mT(b2)), a2.sizes());
             ga = kernels::reshaped(ga, a.sizes());
           }
           if (g.needs(1)) {
             if (b2.dim() == 2 && a2.dim() > 2) {
               // b is shared by the whole batch: one (K, rows) x (rows, N) product over every row.
               const int64_t K = a2.size(-1), rows = a2.numel() / std::max<int64_t>(K, 1);
               gb = kernels::matmul(mT(kernels::reshaped(a2, {rows, K})), kernels::reshaped(g2, {rows, N}));
             } else {
               gb = autograd::sum_to(kernels::matmul(mT(a2), g2), b2.sizes());
             }
             gb = kernels::reshaped(gb, b.sizes());
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
           Tensor g2 = kernels::reshaped(g.grad(), {rows, outf});
           Tensor gx, gw, gb;
           if (g.needs(0)) gx = kernels::reshaped(kernels::matmul(g2, weight), x.sizes());  // g W
           if (g.needs(1)) gw = kernels::matmul(mT(g2), kernels::reshaped(x, {rows, in}));  // g^T x
           // Column sums as a ones-vector product: no transposed copy of the gradient.
           if (g.needs(2)) gb = kernels::matmul(full({rows}, 1.0, {g2.dtype(), g2.device()}), g2);
           return {gx, gw, gb};
         },
         {x, weight});
  return out;
}

Tensor gelu_mlp(const Tensor& x_in, const Tensor& w1_in, const Tensor& b1_in, const Tensor& w2_in,
                const Tensor& b2_in) {
  profiler::Scope prof_scope("gelu_mlp");
  const auto cast = [](const Tensor& t) { return autograd::autocast(t, AutocastCategory::LowerPrecision); };
  const Tensor x = cast(x_in), w1 = cast(w1_in), b1 = cast(b1_in), w2 = cast(w2_in), b2 = cast(b2_in);
  if (!autograd::any_requires_grad({&x, &w1, &b1, &w2, &b2})) {
    // Nothing will read the pre-activation: on the GPU linear's GELU epilogue (no auxiliary output).
    const Tensor h = x.device().is_cuda() ? kernels::linear(x, w1, b1, kernels::LinearEpilogue::GeluTanh)
                                          : kernels::unary(kernels::UnaryOp::GeluTanh, kernels::linear(x, w1, b1));
    return kernels::linear(h, w2, b2);
  }
  // pre = x w1^T + b1 and h = gelu(pre): what the composite's GELU and second linear keep.
  const kernels::LinearGeluAux fc = kernels::linear_gelu_aux(x, w1, b1);
  const Tensor h = fc.out, pre = fc.pre;
  Tensor out = kernels::linear(h, w2, b2);
  record("gelu_mlp", {x, w1, b1, w2, b2}, out,
         [x, w1, w2, h, pre](const GradCtx& g) -> std::vector<Tensor> {
           const int64_t in = w1.size(1), hidden = w2.size(1), outf = w2.size(0);
           const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
           Tensor g2 = kernels::reshaped(g.grad(), {rows, outf});
           Tensor gx, gw1, gb1, gw2, gb2;
           // The second linear's weight and bias gradients, as linear's backward computes them.
           if (g.needs(3)) gw2 = kernels::matmul(mT(g2), kernels::reshaped(h, {rows, hidden}));
           if (g.needs(4)) gb2 = kernels::matmul(full({rows}, 1.0, {g2.dtype(), g2.device()}), g2);
           if (g.needs(0) || g.needs(1) || g.needs(2)) {
             // d(pre) = (g w2) * gelu'(pre), and b1's gradient (its column sums), in one product.
             kernels::MatmulDgelu d = kernels::matmul_dgelu(g2, w2, kernels::reshaped(pre, {rows, hidden}), g.needs(2));
             gb1 = d.grad_bias;
             if (g.needs(0)) gx = kernels::reshaped(kernels::matmul(d.grad_pre, w1), x.sizes());
             if (g.needs(1)) gw1 = kernels::matmul(mT(d.grad_pre), kernels::reshaped(x, {rows, in}));
           }
           return {gx, gw1, gb1, gw2, gb2};
         },
         {x, w1, w2});
  return out;
}

}  // namespace brisk
