// Fused CPU optimizer updates and gradient reductions. Each element is independent, so splitting
// the flat work over threads cannot change results; norms reduce per tensor chunk then sum in a
// fixed order. The per-element rules are shared with the GPU (brisk/kernels/device/optim.h).
#include <cmath>
#include <type_traits>

#include "brisk/kernels/device/convert.h"
#include "brisk/kernels/device/optim.h"
#include "brisk/kernels/dispatch.h"
#include "cpu/optim_cpu.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

namespace {

using device::from_acc;
using device::to_acc;

// Runs body(tensor index, element range) for each tensor, splitting large tensors over threads.
template <class Body>
void for_each_element(const std::vector<Tensor>& params, Body body) {
  for (size_t t = 0; t < params.size(); ++t) {
    const int64_t n = params[t].numel();
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t c = 0; c < (n + 4095) / 4096; ++c) body(t, c * 4096, std::min<int64_t>(n, (c + 1) * 4096));
  }
}

template <class T>
T* ptr(const std::vector<Tensor>& v, size_t i) {
  return v.empty() ? nullptr : static_cast<T*>(v[i].data_ptr());
}

// Marks "no low-precision copy" in adam_range.
struct NoCopy {};

// Adam's loop over one range with the rule's switches fixed at compile time, so the loop has no
// control flow and vectorises (the same arithmetic per element, so the same bits). With a copy
// type C, the updated parameter is also stored rounded to C (from_acc, as cast does).
template <bool Decoupled, bool Amsgrad, bool Maximize, class T, class A, class C>
void adam_range(device::AdamRule<A> rule, T* p, const T* g, T* m, T* v, T* vmax, C* copy, int64_t b, int64_t e) {
  rule.decoupled = Decoupled;
  rule.amsgrad = Amsgrad;
  rule.maximize = Maximize;
  for (int64_t i = b; i < e; ++i) {
    A pv = to_acc(p[i]), mv = to_acc(m[i]), vv = to_acc(v[i]);
    A xv = Amsgrad ? to_acc(vmax[i]) : A(0);
    rule.apply(pv, to_acc(g[i]), mv, vv, xv);
    p[i] = from_acc<T>(pv);
    m[i] = from_acc<T>(mv);
    v[i] = from_acc<T>(vv);
    if constexpr (Amsgrad) vmax[i] = from_acc<T>(xv);
    if constexpr (!std::is_same_v<C, NoCopy>) copy[i] = from_acc<C>(pv);
  }
}

template <bool Decoupled, bool Amsgrad, class T, class A, class C>
void adam_range(const device::AdamRule<A>& rule, T* p, const T* g, T* m, T* v, T* vmax, C* copy, int64_t b, int64_t e) {
  if (rule.maximize)
    adam_range<Decoupled, Amsgrad, true>(rule, p, g, m, v, vmax, copy, b, e);
  else
    adam_range<Decoupled, Amsgrad, false>(rule, p, g, m, v, vmax, copy, b, e);
}

template <class T, class A, class C>
void adam_range(const device::AdamRule<A>& rule, T* p, const T* g, T* m, T* v, T* vmax, C* copy, int64_t b, int64_t e) {
  if (rule.decoupled)
    vmax ? adam_range<true, true>(rule, p, g, m, v, vmax, copy, b, e)
         : adam_range<true, false>(rule, p, g, m, v, vmax, copy, b, e);
  else
    vmax ? adam_range<false, true>(rule, p, g, m, v, vmax, copy, b, e)
         : adam_range<false, false>(rule, p, g, m, v, vmax, copy, b, e);
}

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_bufs, const SgdHyper& h) {
  if (params.empty()) return;
  visit_float(params[0].dtype(), params[0].device(), "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const auto rule =
        device::make_sgd_rule<A>(h.lr, h.momentum, h.dampening, h.weight_decay, h.nesterov, h.maximize, h.first_step);
    for_each_element(params, [&](size_t t, int64_t b, int64_t e) {
      T* p = ptr<T>(params, t);
      const T* g = ptr<T>(grads, t);
      T* buf = ptr<T>(momentum_bufs, t);
      for (int64_t i = b; i < e; ++i) {
        A pv = to_acc(p[i]);
        A bv = buf ? to_acc(buf[i]) : A(0);
        rule.apply(pv, to_acc(g[i]), bv);
        p[i] = from_acc<T>(pv);
        if (buf) buf[i] = from_acc<T>(bv);
      }
    });
  });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs, const AdamHyper& h,
               const std::vector<Tensor>& copies) {
  if (params.empty()) return;
  visit_float(params[0].dtype(), params[0].device(), "adam_step", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const auto rule = device::make_adam_rule<A>(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.decoupled, h.amsgrad,
                                                h.maximize, h.step);
    for_each_element(params, [&](size_t t, int64_t b, int64_t e) {
      T* p = ptr<T>(params, t);
      const T* g = ptr<T>(grads, t);
      T* m = ptr<T>(exp_avgs, t);
      T* v = ptr<T>(exp_avg_sqs, t);
      T* vmax = h.amsgrad ? ptr<T>(max_exp_avg_sqs, t) : nullptr;
      // Copies exist for f32 parameters only (checked by kernels/src/optim.cpp).
      if constexpr (std::is_same_v<T, float>) {
        if (!copies.empty() && copies[0].dtype() == DType::BF16)
          return adam_range(rule, p, g, m, v, vmax, ptr<BFloat16>(copies, t), b, e);
        if (!copies.empty()) return adam_range(rule, p, g, m, v, vmax, ptr<Half>(copies, t), b, e);
      }
      adam_range(rule, p, g, m, v, vmax, static_cast<NoCopy*>(nullptr), b, e);
    });
  });
}

namespace {

// Op (device::SumSquaresOp / MaxAbsOp) over every element: per 8192-element chunk, then the
// chunks in order, so the result does not depend on the thread count.
template <class Op>
double reduce_all(const std::vector<Tensor>& tensors, const char* name) {
  double total = Op::identity();
  for (const Tensor& t : tensors) {
    visit_float(t.dtype(), t.device(), name, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(t.data_ptr());
      const int64_t n = t.numel(), chunks = (n + 8191) / 8192;
      std::vector<double> partial(static_cast<size_t>(chunks), Op::identity());
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t c = 0; c < chunks; ++c) {
        double s = Op::identity();
        for (int64_t i = c * 8192; i < std::min<int64_t>(n, (c + 1) * 8192); ++i)
          s = Op::push(s, static_cast<double>(to_acc(x[i])));
        partial[static_cast<size_t>(c)] = s;
      }
      for (double s : partial) total = Op::combine(total, s);
    });
  }
  return total;
}

}  // namespace

double sum_of_squares(const std::vector<Tensor>& tensors) {
  return reduce_all<device::SumSquaresOp>(tensors, "sum_of_squares");
}

double max_abs(const std::vector<Tensor>& tensors) {
  return reduce_all<device::MaxAbsOp>(tensors, "max_abs");
}

void clip_grads_with_norm(const std::vector<Tensor>& tensors, double max_norm, double norm) {
  const double coef = device::clip_coefficient(max_norm, norm);
  if (!(coef < 1.0)) return;
  for (const Tensor& t : tensors) {
    visit_float(t.dtype(), t.device(), "clip_grads_with_norm_", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      T* x = static_cast<T*>(t.data_ptr());
      const A s = static_cast<A>(coef);
      const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) x[i] = from_acc<T>(static_cast<A>(to_acc(x[i]) * s));
    });
  }
}

bool unscale_and_check(const std::vector<Tensor>& grads, double inv_scale) {
  bool found = false;
  for (const Tensor& g : grads) {
    visit_float(g.dtype(), g.device(), "unscale_and_check_", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      T* x = static_cast<T*>(g.data_ptr());
      const A s = static_cast<A>(inv_scale);
      const int64_t n = g.numel();
      int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) {
        A v = to_acc(x[i]) * s;
        bad |= !std::isfinite(static_cast<double>(v));
        x[i] = from_acc<T>(v);
      }
      found |= bad != 0;
    });
  }
  return found;
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
