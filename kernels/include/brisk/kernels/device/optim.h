// The per-element rules of the fused optimizer updates and gradient reductions, for host and
// device: the CPU loops (kernels/cpu/optim.cpp) and the CUDA multi-tensor kernels call these same
// functions, so both compute one formula in one precision. A is the compute type: double for f64
// tensors, float for f32 and for 16-bit tensors (loaded into float, updated, rounded once when
// stored: "f32 master math" for bf16/f16 parameters and their state).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "brisk/core/macros.h"
#include "brisk/kernels/device/reduce.h"

namespace brisk::kernels::device {

// torch.optim.SGD: d = g (negated when maximizing) + wd * p; with momentum, buf = d on the first
// step, else momentum * buf + (1 - dampening) * d, and d = buf (or d + momentum * buf, Nesterov);
// p -= lr * d.
template <class A>
struct SgdRule {
  A lr, weight_decay, momentum, dampening;
  bool nesterov, maximize, first_step;

  // buf: the momentum buffer's value (read and written only when momentum != 0).
  BRISK_HOST_DEVICE void apply(A& p, A g, A& buf) const {
    A d = maximize ? -g : g;
    if (weight_decay != A(0)) d += weight_decay * p;
    if (momentum != A(0)) {
      buf = first_step ? d : momentum * buf + (A(1) - dampening) * d;
      d = nesterov ? d + momentum * buf : buf;
    }
    p -= lr * d;
  }
};

template <class A>
SgdRule<A> make_sgd_rule(double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                         bool maximize, bool first_step) {
  return {A(lr), A(weight_decay), A(momentum), A(dampening), nesterov, maximize, first_step};
}

// torch.optim.Adam / AdamW in PyTorch's formulation: m lerps towards g, v = b2 v + (1 - b2) g^2,
// (amsgrad: vmax = max(vmax, v) is used instead of v), step_size = lr / (1 - b1^t),
// denom = sqrt(v) / sqrt(1 - b2^t) + eps, p -= step_size * m / denom. AdamW first scales p by
// 1 - lr * wd; Adam adds wd * p to the gradient.
template <class A>
struct AdamRule {
  A step_size, inv_sqrt_bc2, beta1, beta2, eps, weight_decay, decay;
  bool decoupled, amsgrad, maximize;

  // vmax: read and written only with amsgrad.
  BRISK_HOST_DEVICE void apply(A& p, A g, A& m, A& v, A& vmax) const {
    A gi = maximize ? -g : g;
    if (decoupled) {
      p *= decay;
    } else if (weight_decay != A(0)) {
      gi += weight_decay * p;
    }
    m += (gi - m) * (A(1) - beta1);  // lerp, as PyTorch
    v = beta2 * v + (A(1) - beta2) * gi * gi;
    A vv = v;
    if (amsgrad) {
      vmax = vmax < v ? v : vmax;  // std::max(vmax, v)
      vv = vmax;
    }
    using std::sqrt;
    const A denom = sqrt(vv) * inv_sqrt_bc2 + eps;
    p -= step_size * m / denom;
  }
};

// Bias corrections in double, then rounded to A once (as the CPU always did): on the host, or on
// the device by each block of a capturable update (step and lr read from GPU memory there).
template <class A, class Step>
BRISK_HOST_DEVICE AdamRule<A> make_adam_rule(double lr, double beta1, double beta2, double eps, double weight_decay,
                                             bool decoupled, bool amsgrad, bool maximize, Step step) {
  using std::pow;
  using std::sqrt;
  const double bc1 = 1.0 - pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - pow(beta2, static_cast<double>(step));
  return {A(lr / bc1),     A(1.0 / sqrt(bc2)),         A(beta1),  A(beta2), A(eps),
          A(weight_decay), A(1.0 - lr * weight_decay), decoupled, amsgrad,  maximize};
}

// Reductions over gradients, accumulated in double whatever the tensors' dtype.
// Sum of squares: push adds v * v.
struct SumSquaresOp {
  BRISK_HOST_DEVICE static double identity() { return 0.0; }
  BRISK_HOST_DEVICE static double push(double acc, double v) { return acc + v * v; }
  BRISK_HOST_DEVICE static double combine(double a, double b) { return a + b; }
};
// Largest |v|, starting from 0 (the value of an empty list); NaN wins over any number.
struct MaxAbsOp {
  BRISK_HOST_DEVICE static double identity() { return 0.0; }
  BRISK_HOST_DEVICE static double push(double acc, double v) { return combine(acc, v < 0 ? -v : v); }
  BRISK_HOST_DEVICE static double combine(double a, double b) { return MaxOp<double>::combine(a, b); }
};

// False for inf and NaN (std::isfinite, usable on the device).
template <class A>
BRISK_HOST_DEVICE inline bool is_finite_value(A v) {
  return v > -std::numeric_limits<A>::infinity() && v < std::numeric_limits<A>::infinity();
}

// The scale clip_grad_norm_ applies: max_norm / (norm + 1e-6), used only when below 1 (a NaN
// norm gives NaN: no scaling, as PyTorch).
BRISK_HOST_DEVICE inline double clip_coefficient(double max_norm, double norm) {
  return max_norm / (norm + 1e-6);
}

}  // namespace brisk::kernels::device
