// Fused CPU optimizer updates. Each element is independent, so splitting the flat work over
// threads cannot change results; norms reduce per tensor chunk then sum in a fixed order.
#include "brisk/kernels/optim.h"

#include <cmath>

#include "brisk/kernels/dispatch.h"

namespace brisk::kernels {

namespace {

void check_group(const char* op, const std::vector<Tensor>& params, const std::vector<const std::vector<Tensor>*>& others) {
  for (const auto* v : others)
    BRISK_CHECK(v->empty() || v->size() == params.size(), op, ": got ", v->size(), " state tensors for ", params.size(),
                " parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    BRISK_CHECK(p.device().is_cpu(), op, ": not implemented for ", dtype_name(p.dtype()), " on cuda");
    BRISK_CHECK(p.is_contiguous(), op, ": parameter ", i, " (shape ", p.sizes(), ") must be contiguous");
    for (const auto* v : others) {
      if (v->empty()) continue;
      const Tensor& s = (*v)[i];
      BRISK_CHECK(s.sizes() == p.sizes() && s.is_contiguous(), op, ": tensor for parameter ", i, " has shape ",
                  s.sizes(), " but the parameter has shape ", p.sizes());
    }
  }
}

// Runs body(T* p, const T* g, index range) for each tensor, splitting large tensors over threads.
template <class T, class Body>
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

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_bufs, const SgdHyper& h) {
  check_group("sgd_step", params, {&grads, &momentum_bufs});
  if (params.empty()) return;
  visit_float(params[0].dtype(), params[0].device(), "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      for_each_element<T>(params, [&](size_t t, int64_t b, int64_t e) {
        T* p = ptr<T>(params, t);
        const T* g = ptr<T>(grads, t);
        T* buf = ptr<T>(momentum_bufs, t);
        const T lr = T(h.lr), wd = T(h.weight_decay), mom = T(h.momentum), damp = T(h.dampening);
        for (int64_t i = b; i < e; ++i) {
          T d = h.maximize ? -g[i] : g[i];
          if (wd != T(0)) d += wd * p[i];
          if (mom != T(0)) {
            buf[i] = h.first_step ? d : mom * buf[i] + (T(1) - damp) * d;
            d = h.nesterov ? d + mom * buf[i] : buf[i];
          }
          p[i] -= lr * d;
        }
      });
    } else {
      throw_not_implemented("sgd_step", params[0].dtype(), params[0].device());
    }
  });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
               const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
               const AdamHyper& h) {
  check_group("adam_step", params, {&grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs});
  BRISK_CHECK(!h.amsgrad || max_exp_avg_sqs.size() == params.size(), "adam_step: amsgrad needs max_exp_avg_sq state");
  BRISK_CHECK(h.step >= 1, "adam_step: step must be >= 1, got ", h.step);
  if (params.empty()) return;
  visit_float(params[0].dtype(), params[0].device(), "adam_step", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // PyTorch's formulation: step_size = lr / bc1; denom = sqrt(v) / sqrt(bc2) + eps.
      const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
      const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
      const T step_size = T(h.lr / bc1), inv_sqrt_bc2 = T(1.0 / std::sqrt(bc2));
      const T b1 = T(h.beta1), b2 = T(h.beta2), eps = T(h.eps), wd = T(h.weight_decay);
      const T decay = T(1.0 - h.lr * h.weight_decay);
      for_each_element<T>(params, [&](size_t t, int64_t b, int64_t e) {
        T* p = ptr<T>(params, t);
        const T* g = ptr<T>(grads, t);
        T* m = ptr<T>(exp_avgs, t);
        T* v = ptr<T>(exp_avg_sqs, t);
        T* vmax = h.amsgrad ? ptr<T>(max_exp_avg_sqs, t) : nullptr;
        for (int64_t i = b; i < e; ++i) {
          T gi = h.maximize ? -g[i] : g[i];
          if (h.decoupled) {
            p[i] *= decay;
          } else if (wd != T(0)) {
            gi += wd * p[i];
          }
          m[i] += (gi - m[i]) * (T(1) - b1);  // lerp, as PyTorch
          v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
          T vv = v[i];
          if (vmax) {
            vmax[i] = std::max(vmax[i], v[i]);
            vv = vmax[i];
          }
          const T denom = std::sqrt(vv) * inv_sqrt_bc2 + eps;
          p[i] -= step_size * m[i] / denom;
        }
      });
    } else {
      throw_not_implemented("adam_step", params[0].dtype(), params[0].device());
    }
  });
}

double sum_of_squares(const std::vector<Tensor>& tensors) {
  double total = 0.0;
  for (const Tensor& t : tensors) {
    BRISK_CHECK(t.device().is_cpu() && t.is_contiguous(), "sum_of_squares: needs contiguous CPU tensors, got shape ",
                t.sizes());
    visit_float(t.dtype(), t.device(), "sum_of_squares", [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(t.data_ptr());
      const int64_t n = t.numel(), chunks = (n + 8191) / 8192;
      std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t c = 0; c < chunks; ++c) {
        double s = 0.0;
        for (int64_t i = c * 8192; i < std::min<int64_t>(n, (c + 1) * 8192); ++i) {
          double v = static_cast<double>(static_cast<acc_t<T>>(x[i]));
          s += v * v;
        }
        partial[c] = s;
      }
      for (double s : partial) total += s;  // fixed order: same result on any thread count
    });
  }
  return total;
}

double max_abs(const std::vector<Tensor>& tensors) {
  double m = 0.0;
  for (const Tensor& t : tensors) {
    BRISK_CHECK(t.device().is_cpu() && t.is_contiguous(), "max_abs: needs contiguous CPU tensors, got shape ", t.sizes());
    visit_float(t.dtype(), t.device(), "max_abs", [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(t.data_ptr());
      for (int64_t i = 0; i < t.numel(); ++i) {
        double v = std::fabs(static_cast<double>(static_cast<acc_t<T>>(x[i])));
        if (!(v <= m)) m = v;  // NaN sticks
      }
    });
  }
  return m;
}

}  // namespace brisk::kernels

namespace brisk::kernels {

bool unscale_and_check_(const std::vector<Tensor>& grads, double inv_scale) {
  bool found = false;
  for (const Tensor& g : grads) {
    BRISK_CHECK(g.device().is_cpu() && g.is_contiguous(), "unscale_and_check_: needs contiguous CPU gradients, got shape ",
                g.sizes(), " on ", g.device().str());
    visit_float(g.dtype(), g.device(), "unscale_and_check_", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      T* x = static_cast<T*>(g.data_ptr());
      const A s = static_cast<A>(inv_scale);
      const int64_t n = g.numel();
      int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) {
        A v = static_cast<A>(x[i]) * s;
        bad |= !std::isfinite(static_cast<double>(v));
        x[i] = static_cast<T>(v);
      }
      found |= bad != 0;
    });
    g.bump_version();
  }
  return found;
}

}  // namespace brisk::kernels
