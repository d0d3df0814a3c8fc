// Differentiable conv2d, pooling and batch norm: the kernels do the math, closures call the
// backward kernels.
#include "brisk/autograd/ops_nn.h"

#include "brisk/autograd/autocast.h"
#include "brisk/autograd/grad_mode.h"
#include "brisk/autograd/node.h"
#include "brisk/autograd/ops_shape.h"
#include "brisk/core/profiler.h"
#include "brisk/kernels/conv.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/nn.h"
#include "reuse.h"

namespace brisk {

using autograd::GradCtx;
using autograd::record;

Tensor conv2d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const Conv2dOptions& o) {
  profiler::Scope prof_scope("conv2d");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::LowerPrecision);
  const Tensor weight = autograd::autocast(weight_in, AutocastCategory::LowerPrecision);
  const Tensor bias = autograd::autocast(bias_in, AutocastCategory::LowerPrecision);
  Tensor y = kernels::conv2d(x, weight, bias, o);
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    // Saved as detached handles: the forward's inputs, not its output.
    Tensor xs = x.detach(), ws = weight.detach();
    record("conv2d", {x, weight, bias}, y,
           [xs, ws, o](const GradCtx& g) -> std::vector<Tensor> {
             kernels::Conv2dGrads r = kernels::conv2d_backward(g.grad(), xs, ws, o, g.needs(0), g.needs(1), g.needs(2));
             return {r.input, r.weight, r.bias};
           },
           {xs, ws});
  }
  return y;
}

namespace {

// The relu node whose sole output x is, when x is a temporary nothing else holds (its gradient
// can only come from the op it is handed to); null otherwise.
autograd::Node* relu_of_temporary(const Tensor& x) {
  if (!is_grad_enabled() || !x.defined() || x.impl_ptr().use_count() != 1 || x.impl()->is_view) return nullptr;
  autograd::AutogradMeta* m = autograd::meta(x);
  if (!m || !m->grad_fn || m->output_nr != 0 || m->grad_fn->released || m->grad_fn->next.size() != 1) return nullptr;
  return m->grad_fn->name == kernels::op_name(kernels::UnaryOp::Relu) ? m->grad_fn.get() : nullptr;
}

std::pair<Tensor, Tensor> max_pool2d_impl(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o, bool temporary) {
  profiler::Scope prof_scope("max_pool2d");
  kernels::MaxPool2dResult r = kernels::max_pool2d(x, kernel, o);
  if (!autograd::any_requires_grad({&x})) return {r.values, r.indices};
  autograd::Node* relu = temporary ? relu_of_temporary(x) : nullptr;
  Tensor idx = r.indices;
  if (!relu) {
    record("max_pool2d", {x}, std::vector<Tensor>{r.values, r.indices},
           [idx, in_sizes = x.sizes()](const GradCtx& g) -> std::vector<Tensor> {
             return {kernels::max_pool2d_backward(g.grad(0), idx, in_sizes)};
           });
    return {r.values, r.indices};
  }
  // x = relu(z), and only this pooling reads x: relu's mask at each argmax is (value > 0), so the
  // node masks the pooled gradient and scatters it into z's gradient, taking relu's place. Zero
  // where relu's backward would put zero, 0 + g elsewhere, as the two nodes in turn give.
  // The mask is kept as its own tensor (1 where the value is positive, else 0: relu's outputs
  // are never negative or NaN), so the caller may still change the pooled values in place, as
  // with the separate nodes.
  const autograd::Edge to_relu_input = relu->next[0];
  Tensor positive = kernels::unary(kernels::UnaryOp::Sign, r.values);
  record("relu_max_pool2d", {x}, std::vector<Tensor>{r.values, r.indices},
         [idx, positive, in_sizes = x.sizes()](const GradCtx& g) -> std::vector<Tensor> {
           const Tensor& gy = g.grad(0);
           const Tensor masked = kernels::unary_backward(kernels::UnaryOp::Relu, gy, positive, positive,
                                                         autograd::detail::reusable(gy) ? gy : Tensor());
           return {kernels::max_pool2d_backward(masked, idx, in_sizes)};
         });
  autograd::meta(r.values)->grad_fn->next[0] = to_relu_input;
  return {r.values, r.indices};
}

// max_pool2d's values, through the one-byte taps where the kernels have them (CPU): the backward
// needs only each window's tap, and for a relu output the taps carry relu's mask too (a window
// whose maximum is not > 0 keeps no tap), so the node saves an eighth of the indices' bytes and
// no mask. The same values and gradient bits as the indices' path.
Tensor max_pool2d_values(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o, bool temporary) {
  if (!kernels::max_pool2d_taps_supported(x, kernel)) return max_pool2d_impl(x, kernel, o, temporary).first;
  profiler::Scope prof_scope("max_pool2d");
  const bool grad = autograd::any_requires_grad({&x});
  autograd::Node* relu = grad && temporary ? relu_of_temporary(x) : nullptr;
  kernels::MaxPool2dTaps r = kernels::max_pool2d_taps(x, kernel, o, relu != nullptr);
  if (!grad) return r.values;
  record(relu ? "relu_max_pool2d" : "max_pool2d", {x}, r.values,
         [taps = r.taps, in_sizes = x.sizes(), kernel, o](const GradCtx& g) -> std::vector<Tensor> {
           return {kernels::max_pool2d_taps_backward(g.grad(), taps, in_sizes, kernel, o)};
         });
  if (relu) autograd::meta(r.values)->grad_fn->next[0] = relu->next[0];
  return r.values;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o) {
  return max_pool2d_impl(x, kernel, o, false);
}

Tensor max_pool2d(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o) {
  return max_pool2d_values(x, kernel, o, false);
}

Tensor max_pool2d(Tensor&& x, Size2 kernel, const MaxPool2dOptions& o) {
  return max_pool2d_values(x, kernel, o, true);
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel, const AvgPool2dOptions& o) {
  profiler::Scope prof_scope("avg_pool2d");
  Tensor y = kernels::avg_pool2d(x, kernel, o);
  if (autograd::any_requires_grad({&x})) {
    record("avg_pool2d", {x}, y, [in_sizes = x.sizes(), kernel, o](const GradCtx& g) -> std::vector<Tensor> {
      return {kernels::avg_pool2d_backward(g.grad(), in_sizes, kernel, o)};
    });
  }
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output) {
  profiler::Scope prof_scope("adaptive_avg_pool2d");
  Tensor y = kernels::adaptive_avg_pool2d(x, output);
  if (autograd::any_requires_grad({&x})) {
    record("adaptive_avg_pool2d", {x}, y, [in_sizes = x.sizes()](const GradCtx& g) -> std::vector<Tensor> {
      return {kernels::adaptive_avg_pool2d_backward(g.grad(), in_sizes)};
    });
  }
  return y;
}

Tensor batch_norm(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight_in,
                  const Tensor& bias_in, bool training, double momentum, double eps) {
  profiler::Scope prof_scope("batch_norm");
  BRISK_CHECK(x_in.defined(), "batch_norm: undefined input");
  const Tensor x = autograd::autocast(x_in, AutocastCategory::Fp32);
  // The kernel takes every per-channel tensor in x's dtype: parameters through differentiable
  // casts (their gradients come back in their own dtype), running statistics through copies
  // that are written back after the update.
  auto like_x = [&](const Tensor& t) { return t.defined() ? to(t, x.dtype()) : t; };
  const Tensor weight = like_x(weight_in), bias = like_x(bias_in);
  Tensor rm = running_mean, rv = running_var;
  const bool cast_stats = rm.defined() && rv.defined() && (rm.dtype() != x.dtype() || rv.dtype() != x.dtype());
  if (cast_stats) {
    rm = kernels::cast(running_mean, x.dtype());
    rv = kernels::cast(running_var, x.dtype());
  }
  kernels::BatchNormResult r = kernels::batch_norm(x, weight, bias, rm, rv, training, momentum, eps);
  if (cast_stats && training) {
    kernels::copy_(running_mean, rm);
    kernels::copy_(running_var, rv);
  }
  if (!autograd::any_requires_grad({&x, &weight, &bias})) return r.y;
  // Saved as detached handles: the forward's inputs and statistics, not its output.
  Tensor xs = x.detach(), ws = weight.defined() ? weight.detach() : weight;
  Tensor mean = r.save_mean, invstd = r.save_invstd;
  record("batch_norm", {x, weight, bias}, r.y,
         [xs, ws, mean, invstd, training](const GradCtx& g) -> std::vector<Tensor> {
           kernels::BatchNormGrads d = kernels::batch_norm_backward(g.grad(), xs, ws, mean, invstd, training,
                                                                    {g.needs(0), g.needs(1), g.needs(2)});
           return {d.dx, d.dweight, d.dbias};
         },
         {xs, ws});
  return r.y;
}

}  // namespace brisk
