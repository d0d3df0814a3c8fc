// Differentiable nn functions over the fused kernels in kernels/nn.h (embedding, layer_norm,
// dropout, cross_entropy, nll_loss); mse and l1 are composed from differentiable ops, and
// binary_cross_entropy_with_logits has its own closure for a gradient exact at x == 0.
#include "brisk/autograd/ops_loss.h"

#include "brisk/autograd/autocast.h"
#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_elementwise.h"
#include "brisk/autograd/ops_index.h"
#include "brisk/autograd/ops_reduce.h"
#include "brisk/autograd/ops_shape.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/nn.h"
#include "brisk/kernels/reduce.h"
#include "reuse.h"

namespace brisk {

using autograd::GradCtx;
using autograd::record;
using kernels::BinaryOp;
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

AddLayerNormOutput add_layer_norm(const Tensor& x_in, const Tensor& residual_in, const Shape& normalized_shape,
                                  const Tensor& weight_in, const Tensor& bias_in, double eps) {
  profiler::Scope prof_scope("add_layer_norm");
  BRISK_CHECK(x_in.defined() && residual_in.defined(), "add_layer_norm: undefined input or residual");
  const DType dt = promote_types(x_in.dtype(), residual_in.dtype());
  const AutocastState ac = autocast_state();
  if (ac.enabled && (dt == DType::F16 || dt == DType::BF16)) {
    // layer_norm would cast h to f32: y is f32 while h keeps the 16-bit dtype.
    Tensor h = add(x_in, residual_in);
    return {h, layer_norm(h, normalized_shape, weight_in, bias_in, eps)};
  }
  const Tensor x = to(x_in, dt), residual = to(residual_in, dt);
  const Tensor weight = autograd::autocast(weight_in, AutocastCategory::Fp32);
  const Tensor bias = autograd::autocast(bias_in, AutocastCategory::Fp32);
  kernels::AddLayerNormResult r = kernels::add_layer_norm(x, residual, normalized_shape, weight, bias, eps);
  if (!autograd::any_requires_grad({&x, &residual, &weight, &bias})) return {r.h, r.y};
  const Tensor h = r.h.detach(), mean = r.mean, rstd = r.rstd;
  record("add_layer_norm", {x, residual, weight, bias}, {r.h, r.y},
         [h, weight, mean, rstd](const GradCtx& g) -> std::vector<Tensor> {
           // x and residual get the same gradient: h's (grad_h, zeros when h was not used) plus
           // layer norm's.
           kernels::LayerNormGrads d = kernels::add_layer_norm_backward(
               g.grad(1), g.grad(0), h, mean, rstd, weight, {g.needs(0) || g.needs(1), g.needs(2), g.needs(3)});
           return {g.needs(0) ? d.dx : Tensor(), g.needs(1) ? d.dx : Tensor(), d.dweight, d.dbias};
         },
         {r.h, weight});
  return {r.h, r.y};
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

namespace {

// The class losses with per-class weights, composed from differentiable ops (PyTorch's
// formulas): logp are log-probabilities with classes along dim 1 (dim 0 for a 1-D input).
Tensor weighted_class_loss(const char* op, const Tensor& logp, const Tensor& targets, const CrossEntropyOptions& o) {
  BRISK_CHECK(logp.dim() >= 1, op, ": input must have a class dim, got shape ", logp.sizes());
  const int64_t cdim = logp.dim() == 1 ? 0 : 1;
  const int64_t C = logp.size(cdim);
  const Tensor& w_in = o.weight;
  BRISK_CHECK(w_in.dim() == 1 && w_in.size(0) == C, op, ": weight must have shape [", C, "] (one per class), got ",
              w_in.sizes());
  BRISK_CHECK(w_in.is_floating_point(), op, ": weight must be a floating tensor, got ", dtype_name(w_in.dtype()));
  BRISK_CHECK(w_in.device() == logp.device(), op, ": weight is on ", w_in.device().str(), ", input on ",
              logp.device().str());
  BRISK_CHECK(targets.defined() && (targets.dtype() == DType::I64 || targets.dtype() == DType::I32), op,
              ": targets must be i32 or i64 class indices");
  Shape tshape = logp.sizes();
  tshape.erase(tshape.begin() + cdim);
  BRISK_CHECK(targets.sizes() == tshape, op, ": targets of shape ", targets.sizes(), " do not match input of shape ",
              logp.sizes(), " (expected ", tshape, ")");
  const Tensor w = kernels::cast(w_in.detach(), logp.dtype());  // weights get no gradient
  const Tensor t = kernels::cast(targets, DType::I64);
  const Tensor ignored = eq(t, static_cast<double>(o.ignore_index));
  const Tensor safe = masked_fill(t, ignored, 0.0);
  if (safe.numel() > 0) {
    const int64_t lo = amin(safe).item<int64_t>(), hi = amax(safe).item<int64_t>();
    BRISK_CHECK(lo >= 0 && hi < C, op, ": target ", lo < 0 ? lo : hi, " is out of range for ", C, " classes");
  }
  const Tensor keep = kernels::cast(eq(ignored, 0.0), logp.dtype());
  Tensor picked = squeeze(gather(logp, cdim, unsqueeze(safe, cdim)), cdim);
  Tensor wt = mul(reshape(index_select(w, 0, reshape(safe, {safe.numel()})), tshape), keep);
  Tensor elem = neg(mul(picked, wt));  // 0 where ignored
  const double e = o.label_smoothing;
  if (e > 0.0) {
    Shape wshape(static_cast<size_t>(logp.dim()), 1);
    wshape[static_cast<size_t>(cdim)] = C;
    Tensor smooth = mul(neg(sum(mul(logp, reshape(w, wshape)), {cdim})), keep);
    elem = elem * (1.0 - e) + smooth * (e / static_cast<double>(C));
  }
  switch (o.reduction) {
    case Reduction::None:
      return elem;
    case Reduction::Sum:
      return sum(elem);
    default:
      return div(sum(elem), sum(wt));
  }
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, const CrossEntropyOptions& o) {
  profiler::Scope prof_scope("cross_entropy");
  // Autocast runs cross_entropy in f32. For 16-bit logits the kernels do that themselves: they
  // read the 16-bit logits, accumulate in f32, return an f32 loss and write a 16-bit gradient, so
  // no f32 copy of the (positions x classes) logits is made, nor an f32 gradient cast back (for a
  // language model's classifier, gigabytes a step). The values are those of the cast: every
  // 16-bit value is exact in f32.
  const bool in_kernel_f32 = !o.weight.defined() && autocast_state().enabled &&
                             (logits_in.dtype() == DType::F16 || logits_in.dtype() == DType::BF16);
  const Tensor logits = in_kernel_f32 ? logits_in : autograd::autocast(logits_in, AutocastCategory::Fp32);
  const std::optional<DType> loss_dtype = in_kernel_f32 ? std::optional(DType::F32) : std::nullopt;
  const Reduction red = o.reduction;
  if (o.weight.defined()) {
    BRISK_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0,
                "cross_entropy: label_smoothing must be in [0, 1], got ", o.label_smoothing);
    return weighted_class_loss("cross_entropy", log_softmax(logits, logits.dim() == 1 ? 0 : 1), targets, o);
  }
  kernels::ClassLossResult r =
      kernels::cross_entropy(logits, targets, o.ignore_index, o.label_smoothing, red, loss_dtype);
  if (!autograd::any_requires_grad({&logits})) return r.loss;
  // Keep the log-sum-exp and count, not the loss itself (the node's own output).
  kernels::ClassLossResult saved{Tensor(), r.lse, r.count};
  const int64_t ignore = o.ignore_index;
  const double ls = o.label_smoothing;
  // When this backward is the logits' last reader (no user handle, view, other saved copy; no
  // retain_graph), the gradient is written over them in the same pass that reads them, as llm.c's
  // fused classifier does: no second (positions x classes) buffer (docs/how-brisk-works.md).
  record("cross_entropy", {logits}, r.loss,
         [logits, targets, saved, ignore, ls, red](const GradCtx& g) -> std::vector<Tensor> {
           if (!autograd::detail::overwritable_in_backward(logits))
             return {kernels::cross_entropy_backward(g.grad(), logits, targets, saved, ignore, ls, red)};
           Tensor grad = autograd::detail::take_over(logits);
           kernels::cross_entropy_backward(g.grad(), logits, targets, saved, ignore, ls, red, grad);
           grad.storage()->bump_version();  // the logits are gone: any reader left would be refused
           return {grad};
         },
         {logits, targets});
  return r.loss;
}

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& targets, const CrossEntropyOptions& o) {
  profiler::Scope prof_scope("nll_loss");
  const Tensor log_probs = autograd::autocast(log_probs_in, AutocastCategory::Fp32);
  BRISK_CHECK(o.label_smoothing == 0.0, "nll_loss: label_smoothing is not supported (got ", o.label_smoothing,
              "); use cross_entropy");
  const Reduction red = o.reduction;
  if (o.weight.defined()) return weighted_class_loss("nll_loss", log_probs, targets, o);
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

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction red) {
  profiler::Scope prof_scope("mse_loss");
  const Tensor input = autograd::autocast(input_in, AutocastCategory::Fp32);
  const Tensor target = autograd::autocast(target_in, AutocastCategory::Fp32);
  check_pair("mse_loss", input, target);
  return reduce(square(input - target), red);
}

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction red) {
  profiler::Scope prof_scope("l1_loss");
  const Tensor input = autograd::autocast(input_in, AutocastCategory::Fp32);
  const Tensor target = autograd::autocast(target_in, AutocastCategory::Fp32);
  check_pair("l1_loss", input, target);
  return reduce(abs(input - target), red);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, Reduction reduction) {
  return binary_cross_entropy_with_logits(logits, targets, BCEWithLogitsOptions{.reduction = reduction});
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits_in, const Tensor& targets_in,
                                        const BCEWithLogitsOptions& o) {
  profiler::Scope prof_scope("binary_cross_entropy_with_logits");
  const Tensor logits = autograd::autocast(logits_in, AutocastCategory::Fp32);
  const Tensor targets = autograd::autocast(targets_in, AutocastCategory::Fp32);
  const char* op = "binary_cross_entropy_with_logits";
  const Reduction red = o.reduction;
  check_pair(op, logits, targets);
  // weight and pos_weight: constants (no gradient) in the logits' dtype, broadcast to its shape.
  auto constant = [&](const Tensor& t, const char* name) {
    if (!t.defined()) return Tensor();
    BRISK_CHECK(t.is_floating_point(), op, ": ", name, " must be a floating tensor, got ", dtype_name(t.dtype()));
    BRISK_CHECK(t.device() == logits.device(), op, ": ", name, " is on ", t.device().str(), ", logits on ",
                logits.device().str());
    const Shape &from = t.sizes(), &to = logits.sizes();
    bool fits = from.size() <= to.size();
    for (size_t i = 1; fits && i <= from.size(); ++i)
      fits = from[from.size() - i] == 1 || from[from.size() - i] == to[to.size() - i];
    BRISK_CHECK(fits, op, ": ", name, " of shape ", from, " does not broadcast to the logits' shape ", to);
    return kernels::cast(t.detach(), logits.dtype());
  };
  const Tensor w = constant(o.weight, "weight"), pw = constant(o.pos_weight, "pos_weight");
  using kernels::binary;
  using kernels::binary_scalar;
  using kernels::unary;
  // log1p(exp(-|x|)): exp never overflows.
  Tensor soft = unary(UnaryOp::Log1p, unary(UnaryOp::Exp, unary(UnaryOp::Neg, unary(UnaryOp::Abs, logits))));
  Tensor elem;
  if (!pw.defined()) {  // max(x, 0) - x*y + log1p(exp(-|x|))
    elem = binary(BinaryOp::Add,
                  binary(BinaryOp::Sub, unary(UnaryOp::Relu, logits), binary(BinaryOp::Mul, logits, targets)), soft);
  } else {  // (1 - y) x + (1 + (p - 1) y) softplus(-x), softplus(-x) = log1p(exp(-|x|)) + max(-x, 0)
    Tensor sp = binary(BinaryOp::Add, soft, unary(UnaryOp::Relu, unary(UnaryOp::Neg, logits)));
    Tensor lw =
        binary_scalar(BinaryOp::Add, binary(BinaryOp::Mul, binary_scalar(BinaryOp::Sub, pw, 1.0), targets), 1.0);
    elem = binary(BinaryOp::Add, binary(BinaryOp::Mul, binary_scalar(BinaryOp::Sub, targets, 1.0, true), logits),
                  binary(BinaryOp::Mul, lw, sp));
  }
  if (w.defined()) elem = binary(BinaryOp::Mul, elem, w);
  Tensor out = red == Reduction::None   ? elem
               : red == Reduction::Mean ? kernels::mean(elem, {})
                                        : kernels::sum(elem, {});
  if (!autograd::any_requires_grad({&logits, &targets})) return out;
  record(op, {logits, targets}, out,
         [logits, targets, w, pw, red](const GradCtx& g) -> std::vector<Tensor> {
           Tensor ge = spread_grad(g.grad(), logits.sizes(), red);
           if (w.defined()) ge = binary(BinaryOp::Mul, ge, w);
           Tensor gx, gy;
           if (!pw.defined()) {
             if (g.needs(0))
               gx = binary(BinaryOp::Mul, ge, binary(BinaryOp::Sub, unary(UnaryOp::Sigmoid, logits), targets));
             if (g.needs(1)) gy = binary(BinaryOp::Mul, ge, unary(UnaryOp::Neg, logits));
             return {gx, gy};
           }
           // d/dx = (1 - y) - (1 + (p - 1) y) sigmoid(-x); d/dy = -x + (p - 1) softplus(-x).
           Tensor pm1 = binary_scalar(BinaryOp::Sub, pw, 1.0);
           if (g.needs(0)) {
             Tensor lw = binary_scalar(BinaryOp::Add, binary(BinaryOp::Mul, pm1, targets), 1.0);
             Tensor sig_neg = unary(UnaryOp::Sigmoid, unary(UnaryOp::Neg, logits));
             gx = binary(BinaryOp::Mul, ge,
                         binary(BinaryOp::Sub, binary_scalar(BinaryOp::Sub, targets, 1.0, true),
                                binary(BinaryOp::Mul, lw, sig_neg)));
           }
           if (g.needs(1)) {
             Tensor sp =
                 binary(BinaryOp::Add,
                        unary(UnaryOp::Log1p, unary(UnaryOp::Exp, unary(UnaryOp::Neg, unary(UnaryOp::Abs, logits)))),
                        unary(UnaryOp::Relu, unary(UnaryOp::Neg, logits)));
             gy = binary(BinaryOp::Mul, ge, binary(BinaryOp::Sub, binary(BinaryOp::Mul, pm1, sp), logits));
           }
           return {gx, gy};
         },
         {logits, targets, w, pw});
  return out;
}

}  // namespace brisk
