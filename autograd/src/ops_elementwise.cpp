// Differentiable elementwise ops: compute through kernels, record a node with a closure.
#include "brisk/autograd/ops_elementwise.h"

#include "brisk/autograd/grad_mode.h"
#include "brisk/autograd/node.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/elementwise.h"
#include "kernel_calls.h"
#include "reuse.h"

namespace brisk {

using autograd::detail::kdiv;
using autograd::detail::kmul;
using autograd::detail::scalar_like;

using autograd::GradCtx;
using autograd::record;
using autograd::sum_to;
using kernels::BinaryOp;
using kernels::CompareOp;
using kernels::UnaryOp;

namespace {

Tensor kbin(BinaryOp op, const Tensor& a, const Tensor& b) {
  return kernels::binary(op, a, b);
}
Tensor kscal(BinaryOp op, const Tensor& a, double s) {
  return kernels::binary_scalar(op, a, s);
}

// What each unary op's backward reads: its input x, its output y, or neither (Neg, Sign).
// Relu reads y (y > 0 exactly where x > 0), so relu's input need not be kept for backward.
enum class Reads { Nothing, Input, Output };
Reads backward_reads(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Sign:
      return Reads::Nothing;
    case UnaryOp::Exp:
    case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt:
    case UnaryOp::Relu:
    case UnaryOp::Sigmoid:
    case UnaryOp::Tanh:
    case UnaryOp::Reciprocal:
    case UnaryOp::Expm1:
      return Reads::Output;
    default:
      return Reads::Input;
  }
}

// y = op(x), recorded. `reuse_input`: the caller handed x over (an rvalue) and y may be written
// over it when nothing else can see x's bytes and backward does not need x.
Tensor unary_op(UnaryOp op, const Tensor& x, bool reuse_input = false) {
  profiler::Scope prof_scope(kernels::op_name(op));
  const Reads reads = backward_reads(op);
  const bool in_place = reuse_input && x.is_floating_point() && reads != Reads::Input && autograd::detail::reusable(x);
  // (No version bump for the overwrite: nothing can read x's old values, and x's history, which
  // the node below points at, must still look current.)
  Tensor y = in_place ? autograd::detail::take_over(kernels::unary(op, x, x)) : kernels::unary(op, x);
  if (autograd::any_requires_grad({&x})) {
    // Only what backward reads is kept alive (a stand-in of the right shape otherwise).
    const Tensor xs = reads == Reads::Input ? x.detach() : Tensor();
    const Tensor ys = reads == Reads::Output ? y.detach() : Tensor();
    std::vector<Tensor> saved;
    if (xs.defined()) saved.push_back(xs);
    if (ys.defined()) saved.push_back(ys);
    record(
        kernels::op_name(op), {x}, y,
        [op, xs, ys](const GradCtx& g) -> std::vector<Tensor> {
          const Tensor& grad = g.grad();
          const Tensor& in = xs.defined() ? xs : ys.defined() ? ys : grad;
          // The engine drops this gradient after the node: when nothing else holds it, the
          // input's gradient is written over it.
          const Tensor out = grad.dtype() == in.dtype() && autograd::detail::reusable(grad) ? grad : Tensor();
          return {kernels::unary_backward(op, grad, in, ys, out)};
        },
        saved);
  }
  return y;
}

// What a binary op's backward reads (checked for in-place changes before it runs).
enum Saves : unsigned { kSaveNone = 0, kSaveA = 1, kSaveB = 2, kSaveOut = 4 };

// Gradients of a binary op, summed back to each input's shape.
template <class F>
Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b, const char* name, unsigned saves, F grads) {
  profiler::Scope prof_scope(name);
  Tensor out = kbin(op, a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    // Only what backward reads is kept alive (add and sub keep neither operand nor the result);
    // the rest are undefined in `grads`.
    const Tensor as = saves & kSaveA ? a : Tensor(), bs = saves & kSaveB ? b : Tensor();
    const Tensor os = saves & kSaveOut ? out.detach() : Tensor();
    std::vector<Tensor> saved;
    for (const Tensor* t : {&as, &bs, &os})
      if (t->defined()) saved.push_back(*t);
    record(
        name, {a, b}, out,
        [as, bs, os, sa = a.sizes(), sb = b.sizes(), grads](const GradCtx& g) -> std::vector<Tensor> {
          auto [ga, gb] = grads(g, as, bs, os);
          return {ga.defined() ? sum_to(ga, sa) : ga, gb.defined() ? sum_to(gb, sb) : gb};
        },
        saved);
  }
  return out;
}

using GradPair = std::pair<Tensor, Tensor>;

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  if (alpha != 1.0) return add(a, mul(b, scalar_like(b, alpha)));
  return binary_op(BinaryOp::Add, a, b, "add", kSaveNone,
                   [](const GradCtx& g, const Tensor&, const Tensor&, const Tensor&) {
                     return GradPair{g.needs(0) ? g.grad() : Tensor(), g.needs(1) ? g.grad() : Tensor()};
                   });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::Sub, a, b, "sub", kSaveNone,
                   [](const GradCtx& g, const Tensor&, const Tensor&, const Tensor&) {
                     return GradPair{g.needs(0) ? g.grad() : Tensor(),
                                     g.needs(1) ? kernels::unary(UnaryOp::Neg, g.grad()) : Tensor()};
                   });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op(
      BinaryOp::Mul, a, b, "mul", kSaveA | kSaveB,
      [](const GradCtx& g, const Tensor& x, const Tensor& y, const Tensor&) {
        return GradPair{g.needs(0) ? kmul(g.grad(), y) : Tensor(), g.needs(1) ? kmul(g.grad(), x) : Tensor()};
      });
}

Tensor div(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::Div, a, b, "div", kSaveB | kSaveOut,
                   [](const GradCtx& g, const Tensor&, const Tensor& y, const Tensor& o) {
                     Tensor ga = g.needs(0) ? kdiv(g.grad(), y) : Tensor();
                     // d(a/b)/db = -a/b^2 = -out/b
                     Tensor gb = g.needs(1) ? kernels::unary(UnaryOp::Neg, kdiv(kmul(g.grad(), o), y)) : Tensor();
                     return GradPair{ga, gb};
                   });
}

Tensor pow(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::Pow, a, b, "pow", kSaveA | kSaveB | kSaveOut,
                   [](const GradCtx& g, const Tensor& x, const Tensor& y, const Tensor& o) {
                     Tensor ga, gb;
                     if (g.needs(0)) {  // y * x^(y-1)
                       Tensor xm = kbin(BinaryOp::Pow, x, kscal(BinaryOp::Sub, y, 1.0));
                       ga = kmul(g.grad(), kmul(y, xm));
                     }
                     if (g.needs(1)) gb = kmul(g.grad(), kmul(o, kernels::unary(UnaryOp::Log, x)));
                     return GradPair{ga, gb};
                   });
}

Tensor pow(const Tensor& a, double exponent) {
  profiler::Scope prof_scope("pow");
  Tensor out = kscal(BinaryOp::Pow, a, exponent);
  if (autograd::any_requires_grad({&a})) {
    record("pow", {a}, out,
           [as = a, exponent](const GradCtx& g) -> std::vector<Tensor> {
             Tensor d = kscal(BinaryOp::Mul, kscal(BinaryOp::Pow, as, exponent - 1.0), exponent);
             return {kmul(g.grad(), d)};
           },
           {a});
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::Maximum, a, b, "maximum", kSaveA | kSaveB,
                   [](const GradCtx& g, const Tensor& x, const Tensor& y, const Tensor&) {
                     Tensor mask = kernels::compare(CompareOp::Ge, x, y);  // ties go to a
                     Tensor zero = scalar_like(g.grad(), 0.0);
                     return GradPair{g.needs(0) ? kernels::where(mask, g.grad(), zero) : Tensor(),
                                     g.needs(1) ? kernels::where(mask, zero, g.grad()) : Tensor()};
                   });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::Minimum, a, b, "minimum", kSaveA | kSaveB,
                   [](const GradCtx& g, const Tensor& x, const Tensor& y, const Tensor&) {
                     Tensor mask = kernels::compare(CompareOp::Le, x, y);
                     Tensor zero = scalar_like(g.grad(), 0.0);
                     return GradPair{g.needs(0) ? kernels::where(mask, g.grad(), zero) : Tensor(),
                                     g.needs(1) ? kernels::where(mask, zero, g.grad()) : Tensor()};
                   });
}

Tensor neg(const Tensor& x) {
  return unary_op(UnaryOp::Neg, x);
}
Tensor exp(const Tensor& x) {
  return unary_op(UnaryOp::Exp, x);
}
Tensor exp(Tensor&& x) {
  return unary_op(UnaryOp::Exp, x, true);
}
Tensor log(const Tensor& x) {
  return unary_op(UnaryOp::Log, x);
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::Sqrt, x);
}
Tensor rsqrt(const Tensor& x) {
  return unary_op(UnaryOp::Rsqrt, x);
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::Abs, x);
}
Tensor relu(const Tensor& x) {
  return unary_op(UnaryOp::Relu, x);
}
Tensor relu(Tensor&& x) {
  return unary_op(UnaryOp::Relu, x, true);
}
Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  return unary_op(approximate == GeluApproximation::Tanh ? UnaryOp::GeluTanh : UnaryOp::GeluErf, x);
}
Tensor silu(const Tensor& x) {
  return unary_op(UnaryOp::Silu, x);
}
Tensor sigmoid(const Tensor& x) {
  return unary_op(UnaryOp::Sigmoid, x);
}
Tensor sigmoid(Tensor&& x) {
  return unary_op(UnaryOp::Sigmoid, x, true);
}
Tensor tanh(const Tensor& x) {
  return unary_op(UnaryOp::Tanh, x);
}
Tensor tanh(Tensor&& x) {
  return unary_op(UnaryOp::Tanh, x, true);
}
Tensor sin(const Tensor& x) {
  return unary_op(UnaryOp::Sin, x);
}
Tensor cos(const Tensor& x) {
  return unary_op(UnaryOp::Cos, x);
}
Tensor square(const Tensor& x) {
  return unary_op(UnaryOp::Square, x);
}
Tensor reciprocal(const Tensor& x) {
  return unary_op(UnaryOp::Reciprocal, x);
}
Tensor sign(const Tensor& x) {
  return unary_op(UnaryOp::Sign, x);
}
Tensor log1p(const Tensor& x) {
  return unary_op(UnaryOp::Log1p, x);
}
Tensor expm1(const Tensor& x) {
  return unary_op(UnaryOp::Expm1, x);
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  profiler::Scope prof_scope("clamp");
  Tensor out = kernels::clamp(x, min, max);
  if (autograd::any_requires_grad({&x})) {
    record("clamp", {x}, out,
           [xs = x, min, max](const GradCtx& g) -> std::vector<Tensor> {
             return {kernels::clamp_backward(g.grad(), xs, min, max)};
           },
           {x});
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  profiler::Scope prof_scope("where");
  Tensor out = kernels::where(cond, a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    record("where", {a, b}, out,
           [cs = cond, as = a, bs = b](const GradCtx& g) -> std::vector<Tensor> {
             Tensor zero = scalar_like(g.grad(), 0.0);
             Tensor ga = g.needs(0) ? sum_to(kernels::where(cs, g.grad(), zero), as.sizes()) : Tensor();
             Tensor gb = g.needs(1) ? sum_to(kernels::where(cs, zero, g.grad()), bs.sizes()) : Tensor();
             return {ga, gb};
           },
           {cond});
  }
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return kernels::compare(CompareOp::Eq, a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return kernels::compare(CompareOp::Ne, a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return kernels::compare(CompareOp::Lt, a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return kernels::compare(CompareOp::Le, a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return kernels::compare(CompareOp::Gt, a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return kernels::compare(CompareOp::Ge, a, b);
}
Tensor eq(const Tensor& a, double s) {
  return kernels::compare_scalar(CompareOp::Eq, a, s);
}
Tensor ne(const Tensor& a, double s) {
  return kernels::compare_scalar(CompareOp::Ne, a, s);
}
Tensor lt(const Tensor& a, double s) {
  return kernels::compare_scalar(CompareOp::Lt, a, s);
}
Tensor le(const Tensor& a, double s) {
  return kernels::compare_scalar(CompareOp::Le, a, s);
}
Tensor gt(const Tensor& a, double s) {
  return kernels::compare_scalar(CompareOp::Gt, a, s);
}
Tensor ge(const Tensor& a, double s) {
  return kernels::compare_scalar(CompareOp::Ge, a, s);
}

namespace {
// tensor op scalar, differentiable w.r.t. the tensor.
Tensor scalar_op(BinaryOp op, const Tensor& a, double s, bool scalar_first) {
  profiler::Scope prof_scope(kernels::op_name(op));
  Tensor out = kernels::binary_scalar(op, a, s, scalar_first);
  if (autograd::any_requires_grad({&a})) {
    // Only s / a reads a tensor in backward (a and the result).
    const bool reads = op == BinaryOp::Div && scalar_first;
    const Tensor as = reads ? a : Tensor(), os = reads ? out.detach() : Tensor();
    record(
        kernels::op_name(op), {a}, out,
        [op, as, os, s, scalar_first](const GradCtx& g) -> std::vector<Tensor> {
          const Tensor& gr = g.grad();
          switch (op) {
            case BinaryOp::Add:
              return {gr};
            case BinaryOp::Sub:
              return {scalar_first ? kernels::unary(UnaryOp::Neg, gr) : gr};
            case BinaryOp::Mul:
              return {kscal(BinaryOp::Mul, gr, s)};
            case BinaryOp::Div:
              // a / s -> g / s ; s / a -> -g * out / a
              if (!scalar_first) return {kscal(BinaryOp::Mul, gr, 1.0 / s)};
              return {kernels::unary(UnaryOp::Neg, kdiv(kmul(gr, os), as))};
            default:
              BRISK_THROW("scalar ", kernels::op_name(op), ": no gradient");
          }
        },
        reads ? std::vector<Tensor>{as, os} : std::vector<Tensor>{});
  }
  return out;
}
}  // namespace

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}
Tensor operator+(const Tensor& a, double s) {
  return scalar_op(BinaryOp::Add, a, s, false);
}
Tensor operator-(const Tensor& a, double s) {
  return scalar_op(BinaryOp::Sub, a, s, false);
}
Tensor operator*(const Tensor& a, double s) {
  return scalar_op(BinaryOp::Mul, a, s, false);
}
Tensor operator/(const Tensor& a, double s) {
  return scalar_op(BinaryOp::Div, a, s, false);
}
Tensor operator+(double s, const Tensor& a) {
  return scalar_op(BinaryOp::Add, a, s, false);
}
Tensor operator-(double s, const Tensor& a) {
  return scalar_op(BinaryOp::Sub, a, s, true);
}
Tensor operator*(double s, const Tensor& a) {
  return scalar_op(BinaryOp::Mul, a, s, false);
}
Tensor operator/(double s, const Tensor& a) {
  return scalar_op(BinaryOp::Div, a, s, true);
}
Tensor operator<(const Tensor& a, const Tensor& b) {
  return lt(a, b);
}
Tensor operator<=(const Tensor& a, const Tensor& b) {
  return le(a, b);
}
Tensor operator>(const Tensor& a, const Tensor& b) {
  return gt(a, b);
}
Tensor operator>=(const Tensor& a, const Tensor& b) {
  return ge(a, b);
}
Tensor operator<(const Tensor& a, double s) {
  return lt(a, s);
}
Tensor operator<=(const Tensor& a, double s) {
  return le(a, s);
}
Tensor operator>(const Tensor& a, double s) {
  return gt(a, s);
}
Tensor operator>=(const Tensor& a, double s) {
  return ge(a, s);
}

// In-place ops under autograd, as PyTorch: a leaf that requires grad may only be changed with
// grad mode off (an optimizer step); any other tensor may be changed in place while grad mode
// records, and when it or an operand requires grad its history is rebased: the op becomes a new
// node whose input is the tensor's old history, and the tensor's grad_fn points at it. Earlier
// ops that saved the old value notice through the version check. A view is refused (its base's
// history would not see the change); docs/how-brisk-works.md (autograd) explains how.
namespace {

// True when the in-place op must be recorded; throws when it may not run at all.
bool inplace_records(const char* op, const Tensor& t, std::initializer_list<const Tensor*> operands) {
  BRISK_CHECK(t.defined(), op, ": undefined tensor");
  if (!is_grad_enabled()) return false;
  const bool self_requires = autograd::requires_grad(t);
  bool any = self_requires;
  for (const Tensor* o : operands) any = any || autograd::requires_grad(*o);
  if (!any) return false;
  const autograd::AutogradMeta* m = autograd::meta(t);
  BRISK_CHECK(!(self_requires && !(m && m->grad_fn)), op,
              ": in-place update of a leaf tensor that requires grad (shape ", t.sizes(),
              "); wrap the update in a NoGradGuard (as an optimizer step does) or update a clone()");
  BRISK_CHECK(!t.impl()->is_view, op, ": in-place update of a view (shape ", t.sizes(),
              ") while autograd records it (the tensor or an operand requires grad); the tensor it views would "
              "not see the change in its gradient history. Apply the op out of place (v = v.add(1) rather "
              "than v.add_(1)) or to a clone()");
  return true;
}

// Rebases t's history onto a node over (t's old history, operands).
void record_inplace(const char* op, const Tensor& t, std::vector<Tensor> operands, autograd::BackwardFn fn,
                    const std::vector<Tensor>& saved = {}) {
  operands.insert(operands.begin(), t);
  record(op, operands, t, std::move(fn), saved);
}

// The gradient for an operand: summed back to its shape, in its dtype.
Tensor grad_for(const Tensor& g, const Tensor& operand) {
  Tensor r = sum_to(g, operand.sizes());
  return r.dtype() == operand.dtype() ? r : kernels::cast(r, operand.dtype());
}

const Tensor& add_inplace(const char* op, const Tensor& t, const Tensor& other, double alpha) {
  const bool rec = inplace_records(op, t, {&other});
  kernels::add_(t, other, alpha);
  if (rec) {
    Tensor os = other.detach();
    record_inplace(op, t, {other}, [os, alpha](const GradCtx& g) -> std::vector<Tensor> {
      Tensor go;
      if (g.needs(1)) go = grad_for(alpha == 1.0 ? g.grad() : kscal(BinaryOp::Mul, g.grad(), alpha), os);
      return {g.grad(), go};
    });
  }
  return t;
}

// t = kernel(t) for a scalar op whose gradient is g * d.
const Tensor& scalar_inplace(const char* op, const Tensor& t, double s, BinaryOp bop, double d) {
  const bool rec = inplace_records(op, t, {});
  kernels::copy_(t, kscal(bop, t, s));
  if (rec)
    record_inplace(op, t, {}, [d](const GradCtx& g) -> std::vector<Tensor> {
      return {d == 1.0 ? g.grad() : kscal(BinaryOp::Mul, g.grad(), d)};
    });
  return t;
}

// t op= other, computed out of place and copied back: other must broadcast to t's shape.
const Tensor& binary_inplace(const char* op, BinaryOp bop, const Tensor& t, const Tensor& other) {
  BRISK_CHECK(other.defined(), op, ": undefined operand");
  BRISK_CHECK(broadcast_shapes(t.sizes(), other.sizes(), op) == t.sizes(), op, ": cannot broadcast shape ",
              other.sizes(), " into shape ", t.sizes());
  const bool rec = inplace_records(op, t, {&other});
  // mul_'s gradient for other reads t's old value: keep a copy only when it is needed.
  const Tensor old = rec && bop == BinaryOp::Mul && autograd::requires_grad(other) ? t.clone() : Tensor();
  kernels::copy_(t, kbin(bop, t, other));
  if (rec) {
    Tensor os = other.detach(), ts = t.detach();
    if (bop == BinaryOp::Mul) {
      record_inplace(op, t, {other},
                     [os, old](const GradCtx& g) -> std::vector<Tensor> {
                       return {g.needs(0) ? kmul(g.grad(), os) : Tensor(),
                               g.needs(1) ? grad_for(kmul(g.grad(), old), os) : Tensor()};
                     },
                     {os});
    } else {  // Div: d(t/o)/dt = 1/o, d(t/o)/do = -out/o
      record_inplace(op, t, {other},
                     [os, ts](const GradCtx& g) -> std::vector<Tensor> {
                       Tensor gt = g.needs(0) ? kdiv(g.grad(), os) : Tensor();
                       Tensor go = g.needs(1) ? grad_for(kernels::unary(UnaryOp::Neg, kdiv(kmul(g.grad(), ts), os)), os)
                                              : Tensor();
                       return {gt, go};
                     },
                     {os, ts});
    }
  }
  return t;
}

}  // namespace

const Tensor& add_(const Tensor& t, const Tensor& other, double alpha) {
  return add_inplace("add_", t, other, alpha);
}
const Tensor& add_(const Tensor& t, double s) {
  return scalar_inplace("add_", t, s, BinaryOp::Add, 1.0);
}
const Tensor& sub_(const Tensor& t, const Tensor& other, double alpha) {
  return add_inplace("sub_", t, other, -alpha);
}
const Tensor& sub_(const Tensor& t, double s) {
  return scalar_inplace("sub_", t, s, BinaryOp::Sub, 1.0);
}
const Tensor& mul_(const Tensor& t, const Tensor& other) {
  return binary_inplace("mul_", BinaryOp::Mul, t, other);
}
const Tensor& mul_(const Tensor& t, double s) {
  const bool rec = inplace_records("mul_", t, {});
  kernels::mul_scalar_(t, s);
  if (rec)
    record_inplace("mul_", t, {},
                   [s](const GradCtx& g) -> std::vector<Tensor> { return {kscal(BinaryOp::Mul, g.grad(), s)}; });
  return t;
}
const Tensor& div_(const Tensor& t, const Tensor& other) {
  return binary_inplace("div_", BinaryOp::Div, t, other);
}
const Tensor& div_(const Tensor& t, double s) {
  return scalar_inplace("div_", t, s, BinaryOp::Div, 1.0 / s);
}
const Tensor& clamp_(const Tensor& t, std::optional<double> min, std::optional<double> max) {
  const bool rec = inplace_records("clamp_", t, {});
  const Tensor old = rec ? t.clone() : Tensor();  // the gradient mask reads the old value
  kernels::copy_(t, kernels::clamp(t, min, max));
  if (rec)
    record_inplace("clamp_", t, {}, [old, min, max](const GradCtx& g) -> std::vector<Tensor> {
      return {kernels::clamp_backward(g.grad(), old, min, max)};
    });
  return t;
}
const Tensor& fill_(const Tensor& t, double v) {
  const bool rec = inplace_records("fill_", t, {});
  kernels::fill_(t, v);
  // The old value no longer matters: its gradient is zero (no gradient flows).
  if (rec) record_inplace("fill_", t, {}, [](const GradCtx&) -> std::vector<Tensor> { return {Tensor()}; });
  return t;
}
const Tensor& zero_(const Tensor& t) {
  return fill_(t, 0.0);
}
const Tensor& copy_(const Tensor& dst, const Tensor& src) {
  const bool rec = inplace_records("copy_", dst, {&src});
  kernels::copy_(dst, src);
  dst.bump_version();
  if (rec) {
    Tensor ss = src.detach();
    record_inplace("copy_", dst, {src}, [ss](const GradCtx& g) -> std::vector<Tensor> {
      Tensor gs;
      if (g.needs(1)) {
        gs = grad_for(g.grad(), ss);
        if (gs.device() != ss.device()) gs = gs.to(ss.device());
      }
      return {Tensor(), gs};
    });
  }
  return dst;
}

}  // namespace brisk
