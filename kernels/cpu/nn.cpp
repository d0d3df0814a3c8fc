// CPU loops for embedding, layer norm, batch norm, dropout and the class losses. Each output element is
// produced by one thread in a fixed order (rows split over threads, column sums split by
// column), so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "brisk/core/rng.h"
#include "brisk/kernels/device/dropout.h"
#include "brisk/kernels/dispatch.h"
#include "cpu/nn_kernels.h"

namespace brisk::kernels::cpu::BRISK_CPU_ISA {

namespace {

constexpr int64_t kGrain = 32768;  // elements of work below which a loop stays serial

// Statistics of f64 data stay in f64; everything else in f32.
template <class T>
using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// sum_{j < n} f(j) as a SIMD reduction: vector partial sums let a strict (non-fast-math) float
// sum vectorise. The order depends on n and the build's vector width, never on thread count.
template <class S, class F>
S lane_sum(int64_t n, F f) {
  S acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t j = 0; j < n; ++j) acc += f(j);
  return acc;
}

}  // namespace

// --- embedding ---------------------------------------------------------------------------

void embedding(const Tensor& idx, const Tensor& weight, const Tensor& out) {
  const int64_t n = idx.numel(), D = weight.size(1);
  const int64_t* ip = static_cast<const int64_t*>(idx.data<int64_t>());
  const auto* w = static_cast<const char*>(weight.data_ptr());
  auto* o = static_cast<char*>(out.data_ptr());
  const size_t row_bytes = static_cast<size_t>(D) * weight.element_size();
#pragma omp parallel for schedule(static) if (n * D > kGrain)
  for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * row_bytes, w + ip[i] * row_bytes, row_bytes);
}

void embedding_backward(const Tensor& grad, const Tensor& idx, int64_t padding_idx, const Tensor& out) {
  const int64_t n = idx.numel(), V = out.size(0), D = out.size(1);
  const int64_t* ip = static_cast<const int64_t*>(idx.data<int64_t>());
  // Counting sort of positions by index (stable), so each weight row sums its rows in order.
  std::vector<int64_t> start(static_cast<size_t>(V + 1), 0), order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ++start[ip[i] + 1];
  for (int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[fill[ip[i]]++] = i;
  }
  visit_float(grad.dtype(), grad.device(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* g = static_cast<const T*>(grad.data<T>());
    T* o = out.data<T>();
#pragma omp parallel if (n * D + V * D > kGrain)
    {
      std::vector<A> acc(static_cast<size_t>(D));
#pragma omp for schedule(static)
      for (int64_t v = 0; v < V; ++v) {
        std::fill(acc.begin(), acc.end(), A(0));
        if (v != padding_idx) {
          for (int64_t k = start[v]; k < start[v + 1]; ++k) {
            const T* row = g + order[k] * D;
            for (int64_t j = 0; j < D; ++j) acc[j] += static_cast<A>(row[j]);
          }
        }
        for (int64_t j = 0; j < D; ++j) o[v * D + j] = static_cast<T>(acc[j]);
      }
    }
  });
}

// --- layer norm ------------------------------------------------------------------------

namespace {

// Layer norm of R rows of D, shared by layer_norm and add_layer_norm. With `res` (add_layer_norm)
// each input row is first h = x + res, rounded to T exactly as the binary add rounds it (the sum
// in acc_t<T>, then one rounding), written to `hp`; the statistics and y are then computed from
// that row (still in the cache) by the same code as plain layer norm, so y, mean and rstd are bit
// for bit layer_norm(x + res).
template <class T>
void layer_norm_rows(const Tensor& x, const Tensor& res, const Tensor& weight, const Tensor& bias, double eps,
                     const Tensor& h, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  using S = stat_t<T>;
  using A = acc_t<T>;
  const int64_t R = mean.numel(), D = R ? x.numel() / R : 0;
  const T* xp = static_cast<const T*>(x.data<T>());
  const T* resp = res.defined() ? static_cast<const T*>(res.data<T>()) : nullptr;
  T* hp = h.defined() ? h.data<T>() : nullptr;
  const T* wp = weight.defined() ? static_cast<const T*>(weight.data<T>()) : nullptr;
  const T* bp = bias.defined() ? static_cast<const T*>(bias.data<T>()) : nullptr;
  T* yp = y.data<T>();
  S* mp = mean.data<S>();
  S* rp = rstd.data<S>();
#pragma omp parallel for schedule(static) if (R * D > kGrain)
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = xp + r * D;
    T* yr = yp + r * D;
    if (resp) {
      const T* rr = resp + r * D;
      T* hr = hp + r * D;
      for (int64_t j = 0; j < D; ++j)
        hr[j] = static_cast<T>(static_cast<A>(static_cast<A>(xr[j]) + static_cast<A>(rr[j])));
      xr = hr;
    }
    // Two passes (mean, then squared deviations) for accuracy on rows with a large mean.
    const S mu = lane_sum<S>(D, [&](int64_t j) { return static_cast<S>(xr[j]); }) / static_cast<S>(D);
    const S sq = lane_sum<S>(D, [&](int64_t j) {
      S d = static_cast<S>(xr[j]) - mu;
      return d * d;
    });
    const S rs = S(1) / std::sqrt(sq / static_cast<S>(D) + static_cast<S>(eps));
    mp[r] = mu;
    rp[r] = rs;
    // One branch-free loop per affine variant, so each vectorises.
    auto write = [&](auto has_w, auto has_b) {
      for (int64_t j = 0; j < D; ++j) {
        S v = (static_cast<S>(xr[j]) - mu) * rs;
        if constexpr (decltype(has_w)::value) v *= static_cast<S>(wp[j]);
        if constexpr (decltype(has_b)::value) v += static_cast<S>(bp[j]);
        yr[j] = static_cast<T>(v);
      }
    };
    using Yes = std::true_type;
    using No = std::false_type;
    if (wp && bp)
      write(Yes{}, Yes{});
    else if (wp)
      write(Yes{}, No{});
    else if (bp)
      write(No{}, Yes{});
    else
      write(No{}, No{});
  }
}

// Layer norm's backward over rows of x (for add_layer_norm, x is h), shared by both ops. With
// `grad_h` (add_layer_norm) the input gradient is grad_h + the layer-norm gradient, added as the
// autograd engine adds two gradient contributions of h: the layer-norm part rounded to T first,
// then the sum in acc_t<T> rounded once (for f32 and f64 the first rounding changes nothing).
template <class T>
void layer_norm_backward_rows(const Tensor& grad, const Tensor& grad_h, const Tensor& x, const Tensor& mean,
                              const Tensor& rstd, const Tensor& weight, const Tensor& dx, const Tensor& dweight,
                              const Tensor& dbias) {
  using S = stat_t<T>;
  using A = acc_t<T>;
  const int64_t R = mean.numel(), D = R ? x.numel() / R : 0;
  const T* gp = static_cast<const T*>(grad.data<T>());
  const T* ghp = grad_h.defined() ? static_cast<const T*>(grad_h.data<T>()) : nullptr;
  const T* xp = static_cast<const T*>(x.data<T>());
  const T* wp = weight.defined() ? static_cast<const T*>(weight.data<T>()) : nullptr;
  const S* mp = static_cast<const S*>(mean.data<S>());
  const S* rp = static_cast<const S*>(rstd.data<S>());
  if (dx.defined()) {
    T* dp = dx.data<T>();
    // dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w * xhat))
#pragma omp parallel for schedule(static) if (R * D > kGrain)
    for (int64_t r = 0; r < R; ++r) {
      const T* gr = gp + r * D;
      const T* xr = xp + r * D;
      const S mu = mp[r], rs = rp[r];
      auto gh_at = [&](int64_t j) { return static_cast<S>(gr[j]) * (wp ? static_cast<S>(wp[j]) : S(1)); };
      const S s1 = lane_sum<S>(D, gh_at) / static_cast<S>(D);
      const S s2 =
          lane_sum<S>(D, [&](int64_t j) { return gh_at(j) * (static_cast<S>(xr[j]) - mu) * rs; }) / static_cast<S>(D);
      T* dr = dp + r * D;
      for (int64_t j = 0; j < D; ++j) {
        S gh = static_cast<S>(gr[j]) * (wp ? static_cast<S>(wp[j]) : S(1));
        S xh = (static_cast<S>(xr[j]) - mu) * rs;
        dr[j] = static_cast<T>(rs * (gh - s1 - xh * s2));
      }
      // A second loop over the row (in the cache), after the first has rounded each value to T:
      // in one expression the compiler would contract the product above and this add into an
      // FMA for f32 and f64, and the sum would no longer be the composition's.
      if (ghp) {
        const T* ghr = ghp + r * D;
        for (int64_t j = 0; j < D; ++j) dr[j] = static_cast<T>(static_cast<A>(dr[j]) + static_cast<A>(ghr[j]));
      }
    }
  }
  if (dweight.defined() || dbias.defined()) {
    // Column sums over rows: each block of columns belongs to one thread, rows in order.
    T* dwp = dweight.defined() ? dweight.data<T>() : nullptr;
    T* dbp = dbias.defined() ? dbias.data<T>() : nullptr;
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (D + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (R * D > kGrain)
    for (int64_t bi = 0; bi < blocks; ++bi) {
      const int64_t j0 = bi * kBlock, j1 = std::min(D, j0 + kBlock);
      S aw[kBlock] = {}, ab[kBlock] = {};
      for (int64_t r = 0; r < R; ++r) {
        const T* gr = gp + r * D;
        const T* xr = xp + r * D;
        const S mu = mp[r], rs = rp[r];
        for (int64_t j = j0; j < j1; ++j) {
          S g = static_cast<S>(gr[j]);
          aw[j - j0] += g * (static_cast<S>(xr[j]) - mu) * rs;
          ab[j - j0] += g;
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        if (dwp) dwp[j] = static_cast<T>(aw[j - j0]);
        if (dbp) dbp[j] = static_cast<T>(ab[j - j0]);
      }
    }
  }
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  visit_float(x.dtype(), x.device(), "layer_norm", [&](auto tag) {
    layer_norm_rows<decltype(tag)>(x, Tensor(), weight, bias, eps, Tensor(), y, mean, rstd);
  });
}

void add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias, double eps,
                    const Tensor& h, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  visit_float(x.dtype(), x.device(), "add_layer_norm",
              [&](auto tag) { layer_norm_rows<decltype(tag)>(x, residual, weight, bias, eps, h, y, mean, rstd); });
}

void layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  visit_float(x.dtype(), x.device(), "layer_norm backward", [&](auto tag) {
    layer_norm_backward_rows<decltype(tag)>(grad, Tensor(), x, mean, rstd, weight, dx, dweight, dbias);
  });
}

void add_layer_norm_backward(const Tensor& grad_y, const Tensor& grad_h, const Tensor& h, const Tensor& mean,
                             const Tensor& rstd, const Tensor& weight, const Tensor& dinput, const Tensor& dweight,
                             const Tensor& dbias) {
  visit_float(h.dtype(), h.device(), "add_layer_norm backward", [&](auto tag) {
    layer_norm_backward_rows<decltype(tag)>(grad_y, grad_h, h, mean, rstd, weight, dinput, dweight, dbias);
  });
}

// --- batch norm ------------------------------------------------------------------------

void batch_norm(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight, const Tensor& bias,
                const Tensor& running_mean, const Tensor& running_var, bool training, double momentum, double eps,
                const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) {
  const int64_t M = N * S;
  visit_float(x.dtype(), x.device(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = stat_t<T>;
    const T* xp = static_cast<const T*>(x.data<T>());
    const T* wp = weight.defined() ? static_cast<const T*>(weight.data<T>()) : nullptr;
    const T* bp = bias.defined() ? static_cast<const T*>(bias.data<T>()) : nullptr;
    T* rm = running_mean.defined() ? running_mean.data<T>() : nullptr;
    T* rv = running_var.defined() ? running_var.data<T>() : nullptr;
    T* yp = y.data<T>();
    A* mp = save_mean.data<A>();
    A* ip = save_invstd.data<A>();
    const A m = static_cast<A>(momentum), e = static_cast<A>(eps);
    // Channels are independent; each is summed in (n, s) order by one thread.
#pragma omp parallel for schedule(static) if (M * C > kGrain)
    for (int64_t c = 0; c < C; ++c) {
      A mu, invstd;
      if (training) {
        // Two passes (mean, then squared deviations), as layer_norm.
        A sum = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t s = 0; s < S; ++s) sum += static_cast<A>(xp[(n * C + c) * S + s]);
        mu = sum / static_cast<A>(M);
        A sq = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t s = 0; s < S; ++s) {
            const A d = static_cast<A>(xp[(n * C + c) * S + s]) - mu;
            sq += d * d;
          }
        const A var = sq / static_cast<A>(M);
        invstd = A(1) / std::sqrt(var + e);
        if (rm) rm[c] = static_cast<T>(static_cast<A>(rm[c]) * (A(1) - m) + m * mu);
        if (rv) {
          const A unbiased = var * (static_cast<A>(M) / static_cast<A>(M - 1));
          rv[c] = static_cast<T>(static_cast<A>(rv[c]) * (A(1) - m) + m * unbiased);
        }
      } else {
        mu = static_cast<A>(rm[c]);
        invstd = A(1) / std::sqrt(static_cast<A>(rv[c]) + e);
      }
      mp[c] = mu;
      ip[c] = invstd;
      const A w = wp ? static_cast<A>(wp[c]) : A(1), b = bp ? static_cast<A>(bp[c]) : A(0);
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = xp + (n * C + c) * S;
        T* yr = yp + (n * C + c) * S;
        for (int64_t s = 0; s < S; ++s) yr[s] = static_cast<T>((static_cast<A>(xr[s]) - mu) * invstd * w + b);
      }
    }
  });
}

void batch_norm_backward(const Tensor& grad, const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& weight,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training, const Tensor& dx,
                         const Tensor& dweight, const Tensor& dbias) {
  const int64_t M = N * S;
  visit_float(x.dtype(), x.device(), "batch_norm backward", [&](auto tag) {
    using T = decltype(tag);
    using A = stat_t<T>;
    const T* gp = static_cast<const T*>(grad.data<T>());
    const T* xp = static_cast<const T*>(x.data<T>());
    const T* wp = weight.defined() ? static_cast<const T*>(weight.data<T>()) : nullptr;
    const A* mp = static_cast<const A*>(save_mean.data<A>());
    const A* ip = static_cast<const A*>(save_invstd.data<A>());
    T* dxp = dx.defined() ? dx.data<T>() : nullptr;
    T* dwp = dweight.defined() ? dweight.data<T>() : nullptr;
    T* dbp = dbias.defined() ? dbias.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (M * C > kGrain)
    for (int64_t c = 0; c < C; ++c) {
      const A mu = mp[c], invstd = ip[c];
      // sum(g) and sum(g * xhat) over the channel, in (n, s) order.
      A sg = 0, sgx = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t i = (n * C + c) * S + s;
          const A g = static_cast<A>(gp[i]);
          sg += g;
          sgx += g * (static_cast<A>(xp[i]) - mu) * invstd;
        }
      if (dwp) dwp[c] = static_cast<T>(sgx);
      if (dbp) dbp[c] = static_cast<T>(sg);
      if (!dxp) continue;
      const A k = (wp ? static_cast<A>(wp[c]) : A(1)) * invstd;
      const A mg = sg / static_cast<A>(M), mgx = sgx / static_cast<A>(M);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t i = (n * C + c) * S + s;
          const A g = static_cast<A>(gp[i]);
          // Training also differentiates through the batch mean and variance.
          dxp[i] = static_cast<T>(training ? k * (g - mg - (static_cast<A>(xp[i]) - mu) * invstd * mgx) : k * g);
        }
    }
  });
}

// --- dropout -------------------------------------------------------------------------------

void dropout(const Tensor& x, double p, uint64_t seed, uint64_t base, const Tensor& y, const Tensor& mask) {
  const int64_t n = x.numel();
  const int64_t blocks = (n + 3) / 4;
  const float pf = static_cast<float>(p);
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  bool* mp = mask.data<bool>();
  visit_float(x.dtype(), x.device(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.data<T>());
    T* yp = y.data<T>();
    const A s = static_cast<A>(scale);
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t b = 0; b < blocks; ++b) {
      bool keep4[4];
      device::dropout_keep4(seed, base, b, pf, keep4);  // the CUDA kernel's draw, too
      const int64_t i0 = b * 4, i1 = std::min(n, i0 + 4);
      for (int64_t i = i0; i < i1; ++i) {
        const bool keep = keep4[i - i0];
        mp[i] = keep;
        yp[i] = keep ? static_cast<T>(static_cast<A>(xp[i]) * s) : T(0.0f);
      }
    }
  });
}

void dropout_backward(const Tensor& grad, const Tensor& mask, double scale, const Tensor& out) {
  const int64_t n = grad.numel();
  const bool* mp = static_cast<const bool*>(mask.data<bool>());
  visit_float(grad.dtype(), grad.device(), "dropout backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* gp = static_cast<const T*>(grad.data<T>());
    T* op = out.data<T>();
    const A s = static_cast<A>(scale);
#pragma omp parallel for schedule(static) if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) op[i] = mp[i] ? static_cast<T>(static_cast<A>(gp[i]) * s) : T(0.0f);
  });
}

// --- class losses ----------------------------------------------------------------------------

void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index,
                   double label_smoothing, double* row_loss, const Tensor& lse) {
  const int64_t P = targets.numel();  // positions = N * S
  const int64_t* tp = static_cast<const int64_t*>(targets.data<int64_t>());
  visit_float(logits.dtype(), logits.device(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = stat_t<T>;
    const T* zp = static_cast<const T*>(logits.data<T>());
    A* lp = lse.data<A>();
    const A e = static_cast<A>(label_smoothing);
#pragma omp parallel for schedule(static) if (P * C > kGrain)
    for (int64_t pos = 0; pos < P; ++pos) {
      const int64_t n = pos / S, s = pos % S;
      const T* z = zp + n * C * S + s;  // class c at z[c * S]
      A mx = static_cast<A>(z[0]);
      for (int64_t c = 1; c < C; ++c) mx = std::max(mx, static_cast<A>(z[c * S]));
      A se = 0, sz = 0;
      for (int64_t c = 0; c < C; ++c) {
        A v = static_cast<A>(z[c * S]);
        se += std::exp(v - mx);
        sz += v;
      }
      const A l = mx + std::log(se);
      lp[pos] = l;
      const int64_t t = tp[pos];
      if (t == ignore_index) {
        row_loss[pos] = 0.0;
        continue;
      }
      A loss = (A(1) - e) * (l - static_cast<A>(z[t * S]));
      if (e != A(0)) loss += e / static_cast<A>(C) * (static_cast<A>(C) * l - sz);
      row_loss[pos] = static_cast<double>(loss);
    }
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, int64_t C, int64_t S,
                            int64_t ignore_index, double label_smoothing, const double* scale, int64_t n_scale,
                            const Tensor& out) {
  const int64_t P = targets.numel();
  const int64_t* tp = static_cast<const int64_t*>(targets.data<int64_t>());
  visit_float(logits.dtype(), logits.device(), "cross_entropy backward", [&](auto tag) {
    using T = decltype(tag);
    using A = stat_t<T>;
    const T* zp = static_cast<const T*>(logits.data<T>());
    const A* lp = static_cast<const A*>(lse.data<A>());
    T* op = out.data<T>();
    const A e = static_cast<A>(label_smoothing), off = e / static_cast<A>(C), hit = A(1) - e;
#pragma omp parallel for schedule(static) if (P * C > kGrain)
    for (int64_t pos = 0; pos < P; ++pos) {
      const int64_t n = pos / S, s = pos % S;
      const T* z = zp + n * C * S + s;
      T* o = op + n * C * S + s;
      const int64_t t = tp[pos];
      if (t == ignore_index) {
        for (int64_t c = 0; c < C; ++c) o[c * S] = T(0.0f);
        continue;
      }
      const A k = static_cast<A>(scale[n_scale == 1 ? 0 : pos]), l = lp[pos];
      for (int64_t c = 0; c < C; ++c) {
        A g = std::exp(static_cast<A>(z[c * S]) - l) - off - (c == t ? hit : A(0));
        o[c * S] = static_cast<T>(k * g);
      }
    }
  });
}

void nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index,
              double* row_loss) {
  const int64_t P = targets.numel();
  const int64_t* tp = static_cast<const int64_t*>(targets.data<int64_t>());
  visit_float(log_probs.dtype(), log_probs.device(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* lp = static_cast<const T*>(log_probs.data<T>());
    for (int64_t pos = 0; pos < P; ++pos) {
      const int64_t t = tp[pos], n = pos / S, s = pos % S;
      row_loss[pos] = t == ignore_index ? 0.0 : -static_cast<double>(lp[(n * C + t) * S + s]);
    }
  });
}

void nll_loss_backward(const Tensor& targets, int64_t C, int64_t S, int64_t ignore_index, const double* scale,
                       int64_t n_scale, const Tensor& out) {
  const int64_t P = targets.numel();
  const int64_t* tp = static_cast<const int64_t*>(targets.data<int64_t>());
  visit_float(out.dtype(), out.device(), "nll_loss backward", [&](auto tag) {
    using T = decltype(tag);
    T* op = out.data<T>();
    std::fill(op, op + out.numel(), T(0.0f));
    for (int64_t pos = 0; pos < P; ++pos) {
      const int64_t t = tp[pos], n = pos / S, s = pos % S;
      if (t != ignore_index) op[(n * C + t) * S + s] = static_cast<T>(-scale[n_scale == 1 ? 0 : pos]);
    }
  });
}

}  // namespace brisk::kernels::cpu::BRISK_CPU_ISA
