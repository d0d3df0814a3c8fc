// Differentiable nn functions over the fused kernels in kernels/nn.h (embedding, layer_norm,
// dropout, cross_entropy, nll_loss); mse and l1 are composed from differentiable ops, and
// binary_cross_entropy_with_logits has its own closure for a gradient exact at x == 0.
#include "brisk/autograd/ops_loss.h"

#include "brisk/autograd/autocast.h"
#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_elementwise.h"
#include "brisk/autograd/ops_reduce.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/nn.h"
#include "brisk/kernels/reduce.h"

namespace brisk {

using autograd::GradCtx;
using autograd::record;
using kernels::BinaryOp;
using kernels::Reduction;
using kernels::UnaryOp;

namespace {

Tensor reduce(const Tensor& t, Reduction r) {
  switch (r) {
    case Reduction::Mean:
      return mean(t);
    case Reduction::Sum:
      return sum(t);
    default:
      return t;
  }
}

void check_pair(const char* op, const Tensor& input, const Tensor& target) {
  BRISK_CHECK(input.defined() && target.defined(), op, ": undefined input or target");
  BRISK_CHECK(input.sizes() == target.sizes(), op, ": input ", input.sizes(), " and target ", target.sizes(),
              " must have the same shape");
  kernels::check_float(op, input);
  kernels::check_float(op, target);
}

// The gradient of a reduced loss spread back over the elements: g itself for None,
// g (or g / numel for Mean) broadcast to `shape` otherwise.
Tensor spread_grad(const Tensor& g, const Shape& shape, Reduction r) {
  if (r == Reduction::None) return g;
  Tensor out = empty(shape, g.dtype(), g.device());
  kernels::copy_(out, g);
  const int64_t n = shape_numel(shape);
  if (r == Reduction::Mean && n > 0) kernels::mul_scalar_(out, 1.0 / static_cast<double>(n));
  return out;
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx) {
  profiler::Scope prof_scope("embedding");
  Tensor out = kernels::embedding(indices, weight);
  if (!autograd::any_requires_grad({&weight})) return out;
  const int64_t V = weight.size(0);
  record("embedding", {weight}, out,
         [indices, V, padding_idx](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::embedding_backward(g.grad(), indices, V, padding_idx)};
         },
         {indices});
  return out;
}

Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight_in, const Tensor& bias_in,
                  double eps) {
  profiler::Scope prof_scope("layer_norm");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  const Tensor weight = autograd::autocast(weight_in, AutocastCategory::Fp32);
  const Tensor bias = autograd::autocast(bias_in, AutocastCategory::Fp32);
  kernels::LayerNormResult r = kernels::layer_norm(x, normalized_shape, weight, bias, eps);
  if (!autograd::any_requires_grad({&x, &weight, &bias})) return r.y;
  Tensor mean = r.mean, rstd = r.rstd;
  record("layer_norm", {x, weight, bias}, r.y,
         [x, weight, mean, rstd](const GradCtx& g) -> std::vector<Tensor> {
           kernels::LayerNormGrads d =
               kernels::layer_norm_backward(g.grad(), x, mean, rstd, weight, {g.needs(0), g.needs(1), g.needs(2)});
           return {d.dx, d.dweight, d.dbias};
         },
         {x, weight});
  return r.y;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  profiler::Scope prof_scope("dropout");
  BRISK_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  kernels::DropoutResult r = kernels::dropout(x, p, gen);
  Tensor mask = r.mask;
  record("dropout", {x}, r.y,
         [mask, p](const GradCtx& g) -> std::vector<Tensor> { return {kernels::dropout_backward(g.grad(), mask, p)}; });
  return r.y;
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, const CrossEntropyOptions& o) {
  profiler::Scope prof_scope("cross_entropy");
  const Tensor logits = autograd::autocast(logits_in, AutocastCategory::Fp32);
  const Reduction red = kernels::reduction_from_name(o.reduction, "cross_entropy");
  kernels::ClassLossResult r = kernels::cross_entropy(logits, targets, o.ignore_index, o.label_smoothing, red);
  if (!autograd::any_requires_grad({&logits})) return r.loss;
  // Keep the log-sum-exp and count, not the loss itself (the node's own output).
  kernels::ClassLossResult saved{Tensor(), r.lse, r.count};
  const int64_t ignore = o.ignore_index;
  const double ls = o.label_smoothing;
  record("cross_entropy", {logits}, r.loss,
         [logits, targets, saved, ignore, ls, red](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::cross_entropy_backward(g.grad(), logits, targets, saved, ignore, ls, red)};
         },
         {logits, targets});
  return r.loss;
}

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& targets, const CrossEntropyOptions& o) {
  profiler::Scope prof_scope("nll_loss");
  const Tensor log_probs = autograd::autocast(log_probs_in, AutocastCategory::Fp32);
  BRISK_CHECK(o.label_smoothing == 0.0, "nll_loss: label_smoothing is not supported (got ", o.label_smoothing,
              "); use cross_entropy");
  const Reduction red = kernels::reduction_from_name(o.reduction, "nll_loss");
  kernels::ClassLossResult r = kernels::nll_loss(log_probs, targets, o.ignore_index, red);
  if (!autograd::any_requires_grad({&log_probs})) return r.loss;
  kernels::ClassLossResult saved{Tensor(), Tensor(), r.count};
  const int64_t ignore = o.ignore_index;
  record("nll_loss", {log_probs}, r.loss,
         [log_probs, targets, saved, ignore, red](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::nll_loss_backward(g.grad(), log_probs, targets, saved, ignore, red)};
         },
         {log_probs, targets});
  return r.loss;
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, std::string_view reduction) {
  profiler::Scope prof_scope("mse_loss");
  const Tensor input = autograd::autocast(input_in, AutocastCategory::Fp32);
  const Tensor target = autograd::autocast(target_in, AutocastCategory::Fp32);
  const Reduction red = kernels::reduction_from_name(reduction, "mse_loss");
  check_pair("mse_loss", input, target);
  return reduce(square(input - target), red);
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, std::string_view reduction) {
  profiler::Scope prof_scope("l1_loss");
  const Tensor input = autograd::autocast(input_in, AutocastCategory::Fp32);
  const Tensor target = autograd::autocast(target_in, AutocastCategory::Fp32);
  const Reduction red = kernels::reduction_from_name(reduction, "l1_loss");
  check_pair("l1_loss", input, target);
  return reduce(abs(input - target), red);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits_in, const Tensor& targets_in, std::string_view reduction) {
  profiler::Scope prof_scope("binary_cross_entropy_with_logits");
  const Tensor logits = autograd::autocast(logits_in, AutocastCategory::Fp32);
  const Tensor targets = autograd::autocast(targets_in, AutocastCategory::Fp32);
  const char* op = "binary_cross_entropy_with_logits";
  const Reduction red = kernels::reduction_from_name(reduction, op);
  check_pair(op, logits, targets);
  using kernels::binary;
  using kernels::unary;
  // max(x, 0) - x*y + log1p(exp(-|x|)): exp never overflows.
  Tensor soft = unary(UnaryOp::Log1p, unary(UnaryOp::Exp, unary(UnaryOp::Neg, unary(UnaryOp::Abs, logits))));
  Tensor elem = binary(
      BinaryOp::Add, binary(BinaryOp::Sub, unary(UnaryOp::Relu, logits), binary(BinaryOp::Mul, logits, targets)), soft);
  Tensor out = red == Reduction::None   ? elem
               : red == Reduction::Mean ? kernels::mean(elem, {})
                                        : kernels::sum(elem, {});
  if (!autograd::any_requires_grad({&logits, &targets})) return out;
  record(op, {logits, targets}, out,
         [logits, targets, red](const GradCtx& g) -> std::vector<Tensor> {
           Tensor ge = spread_grad(g.grad(), logits.sizes(), red);
           Tensor gx, gy;
           if (g.needs(0))
             gx = binary(BinaryOp::Mul, ge, binary(BinaryOp::Sub, unary(UnaryOp::Sigmoid, logits), targets));
           if (g.needs(1)) gy = binary(BinaryOp::Mul, ge, unary(UnaryOp::Neg, logits));
           return {gx, gy};
         },
         {logits, targets});
  return out;
}

}  // namespace brisk
