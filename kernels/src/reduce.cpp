// Public reductions (sum, mean, prod, amax/amin, max/min with indices, argmax/argmin, var/std,
// logsumexp): argument checks, output allocation and the device switch. The loops are in
// cpu/reduce.cpp and cuda/reduce_*.cu.
#include "brisk/kernels/reduce.h"

#include "brisk/kernels/dispatch.h"
#include "cpu/reduce_kernels.h"
#include "cuda/reduce.h"
#include "src/reduce_args.h"

namespace brisk::kernels {

namespace {

using detail::make_reduction;
using detail::require_float;

void check_nonempty(const char* op, const Tensor& x, const detail::Reduction& r) {
  BRISK_CHECK(r.n_red > 0 || r.n_out == 0, op, ": cannot reduce over zero elements (input shape ", x.sizes(),
              "); there is no identity for ", op);
}

// Integers and bool sum (and multiply) to i64.
DType sum_dtype(const Tensor& x) {
  return x.is_floating_point() ? x.dtype() : DType::I64;
}

template <bool Max>
Tensor extreme(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const auto r = make_reduction(op, x, dims, keepdim);
  check_nonempty(op, x, r);
  Tensor out = empty(r.out, x.dtype(), x.device());
  if (x.device().is_cuda()) {
    if (Max)
      cuda::amax(x, r.reduced, out);
    else
      cuda::amin(x, r.reduced, out);
  } else {
    if (Max)
      cpu::amax(x, r.reduced, out);
    else
      cpu::amin(x, r.reduced, out);
  }
  return out;
}

// Values (optional) and indices along `dim`, or over everything when dim is absent.
ValuesIndices arg_extreme(const char* op, bool is_max, const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                          bool want_values) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(*dim);
  const auto r = make_reduction(op, x, dims, keepdim);
  check_nonempty(op, x, r);
  ValuesIndices vi;
  vi.indices = empty(r.out, DType::I64, x.device());
  if (want_values) vi.values = empty(r.out, x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::arg_extreme(op, x, r.reduced, is_max, vi.values, vi.indices);
  else
    cpu::arg_extreme(op, x, r.reduced, is_max, vi.values, vi.indices);
  return vi;
}

Tensor var_impl(const char* op, const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim,
                bool take_sqrt) {
  require_float(op, x);
  BRISK_CHECK(correction >= 0, op, ": correction must be >= 0, got ", correction, " (input shape ", x.sizes(), ")");
  const auto r = make_reduction(op, x, dims, keepdim);
  Tensor out = empty(r.out, x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::var(x, r.reduced, correction, take_sqrt, out);
  else
    cpu::var(x, r.reduced, correction, take_sqrt, out);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const auto r = make_reduction("sum", x, dims, keepdim);
  Tensor out = empty(r.out, sum_dtype(x), x.device());
  if (x.device().is_cuda())
    cuda::sum(x, r.reduced, out);
  else
    cpu::sum(x, r.reduced, out);
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  require_float("mean", x);
  const auto r = make_reduction("mean", x, dims, keepdim);
  Tensor out = empty(r.out, x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::mean(x, r.reduced, out);
  else
    cpu::mean(x, r.reduced, out);
  return out;
}

Tensor prod(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const auto r = make_reduction("prod", x, dims, keepdim);
  Tensor out = empty(r.out, sum_dtype(x), x.device());
  if (x.device().is_cuda())
    cuda::prod(x, r.reduced, out);
  else
    cpu::prod(x, r.reduced, out);
  return out;
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme<true>("amax", x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme<false>("amin", x, dims, keepdim);
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme("max", true, x, dim, keepdim, true);
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme("min", false, x, dim, keepdim, true);
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmax", true, x, dim, keepdim, false).indices;
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme("argmin", false, x, dim, keepdim, false).indices;
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return var_impl("var", x, dims, correction, keepdim, false);
}
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return var_impl("std", x, dims, correction, keepdim, true);
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  require_float("logsumexp", x);
  const auto r = make_reduction("logsumexp", x, dims, keepdim);
  Tensor out = empty(r.out, x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::logsumexp(x, r.reduced, out);
  else
    cpu::logsumexp(x, r.reduced, out);
  return out;
}

}  // namespace brisk::kernels
