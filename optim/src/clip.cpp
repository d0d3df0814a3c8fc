// Gradient clipping over all parameters together.
#include "brisk/optim/clip.h"

#include <cmath>
#include <limits>

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/optim.h"

namespace brisk::optim {

namespace {
std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> gs;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) gs.push_back(kernels::contiguous(g));
  }
  return gs;
}
}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  BRISK_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
  BRISK_CHECK(norm_type == 2.0 || std::isinf(norm_type), "clip_grad_norm_: norm_type must be 2 or inf, got ", norm_type);
  std::vector<Tensor> gs = grads_of(params);
  if (gs.empty()) return 0.0;
  double total = std::isinf(norm_type) ? kernels::max_abs(gs) : std::sqrt(kernels::sum_of_squares(gs));
  BRISK_CHECK(!error_if_nonfinite || std::isfinite(total), "clip_grad_norm_: the total norm of the gradients is ",
              total, "; set error_if_nonfinite=false to clip anyway");
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (const Tensor& p : params)
      if (p.grad().defined()) kernels::mul_scalar_(p.grad(), coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  BRISK_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) kernels::copy_(g, kernels::clamp(g, -clip_value, clip_value));
  }
}

}  // namespace brisk::optim
