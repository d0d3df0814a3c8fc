// Gradient clipping over all parameters together. On a GPU the total norm stays on the device:
// the clip kernels read it there, and the only host read is the norm this function returns.
#include "brisk/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/optim.h"

namespace brisk::optim {

namespace {

// The parameters' gradients, grouped by device (dtypes may mix). A non-contiguous gradient is
// replaced by a contiguous copy first: the fused kernels scale gradients in place.
std::vector<std::vector<Tensor>> grads_by_device(const std::vector<Tensor>& params) {
  std::vector<std::vector<Tensor>> groups;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous()) {
      g = kernels::contiguous(g);
      p.set_grad(g);
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const std::vector<Tensor>& v) { return v.front().device() == g.device(); });
    if (it == groups.end()) {
      groups.push_back({g});
    } else {
      it->push_back(g);
    }
  }
  return groups;
}

}  // namespace

namespace {

// Clips and returns the total norm as a tensor; with error_if_nonfinite, reads it once into *read
// (before clipping, to throw on a non-finite norm).
Tensor clip_by_total_norm(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite,
                          double* read) {
  BRISK_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
  BRISK_CHECK(norm_type == 2.0 || (std::isinf(norm_type) && norm_type > 0),
              "clip_grad_norm_: norm_type must be 2 or inf, got ", norm_type);
  const std::vector<std::vector<Tensor>> groups = grads_by_device(params);
  if (groups.empty()) return full({}, 0.0, {.dtype = DType::F64});
  const bool inf = std::isinf(norm_type);
  // The total norm as a 0-d f64 tensor: on the gradients' device when there is one device (no
  // host round trip); with several devices each device's norm is read once and combined here.
  Tensor total;
  if (groups.size() == 1) {
    total = kernels::total_norm(groups[0], norm_type);
  } else {
    double acc = 0.0;
    for (const auto& g : groups) {
      const double n = kernels::total_norm(g, norm_type).item<double>();
      acc = inf ? (std::isnan(acc) || std::isnan(n) ? std::numeric_limits<double>::quiet_NaN() : std::max(acc, n))
                : acc + n * n;
    }
    total = full({}, inf ? acc : std::sqrt(acc), {.dtype = DType::F64});
  }
  // The one host read, when a non-finite norm must throw.
  if (error_if_nonfinite) {
    *read = total.item<double>();
    BRISK_CHECK(std::isfinite(*read), "clip_grad_norm_: the total norm of the gradients is ", *read,
                "; set error_if_nonfinite=false to clip anyway");
  }
  for (const auto& g : groups) {
    const Device dev = g.front().device();
    kernels::clip_grads_with_norm_(g, max_norm, total.device() == dev ? total : kernels::to_device(total, dev));
  }
  return total;
}

}  // namespace

Tensor clip_grad_norm_tensor_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                              bool error_if_nonfinite) {
  double read = 0;
  return clip_by_total_norm(params, max_norm, norm_type, error_if_nonfinite, &read);
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  // At most one host read: before clipping when a non-finite norm must throw, else at the end.
  double read = 0;
  const Tensor total = clip_by_total_norm(params, max_norm, norm_type, error_if_nonfinite, &read);
  return error_if_nonfinite ? read : total.item<double>();
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  BRISK_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) kernels::copy_(g, kernels::clamp(g, -clip_value, clip_value));
  }
}

}  // namespace brisk::optim
