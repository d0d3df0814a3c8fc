// Public along-one-dim kernels (softmax, log_softmax and their backward, cumsum, topk,
// take_along_dim_backward): argument checks, layout to contiguous, output allocation and the
// device switch. The loops are in cpu/softmax.cpp and cuda/softmax.cu, cuda/scan_topk.cu.
#include "cuda/softmax.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/reduce.h"
#include "cpu/reduce_kernels.h"
#include "src/reduce_args.h"

namespace brisk::kernels {

namespace {

using detail::require_float;
using detail::wrap_dim_checked;

Tensor softmax_common(const char* op, const Tensor& x, int64_t dim, bool log) {
  require_float(op, x);
  dim = wrap_dim_checked(op, dim, x);
  Tensor xc = contiguous(x);
  Tensor y = empty(x.sizes(), x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::softmax(xc, dim, log, y);
  else
    cpu::softmax(xc, dim, log, y);
  return y;
}

Tensor softmax_backward_common(const char* op, const Tensor& grad, const Tensor& y, int64_t dim, bool log) {
  require_float(op, y);
  BRISK_CHECK(grad.sizes() == y.sizes() && grad.dtype() == y.dtype(), op, ": grad ", grad.sizes(), " ",
              dtype_name(grad.dtype()), " does not match output ", y.sizes(), " ", dtype_name(y.dtype()));
  check_same_device(op, grad, y);
  dim = wrap_dim_checked(op, dim, y);
  Tensor gc = contiguous(grad), yc = contiguous(y);
  Tensor dx = empty(y.sizes(), y.dtype(), y.device());
  if (y.device().is_cuda())
    cuda::softmax_backward(gc, yc, dim, log, dx);
  else
    cpu::softmax_backward(gc, yc, dim, log, dx);
  return dx;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_common("softmax", x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_common("log_softmax", x, dim, true);
}
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return softmax_backward_common("softmax_backward", grad, y, dim, false);
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim) {
  return softmax_backward_common("log_softmax_backward", grad, y, dim, true);
}

Tensor cumsum(const Tensor& x, int64_t dim, bool reverse) {
  dim = wrap_dim_checked("cumsum", dim, x);
  Tensor xc = contiguous(x);
  Tensor y = empty(x.sizes(), x.is_floating_point() ? x.dtype() : DType::I64, x.device());
  if (x.device().is_cuda())
    cuda::cumsum(xc, dim, reverse, y);
  else
    cpu::cumsum(xc, dim, reverse, y);
  return y;
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  dim = wrap_dim_checked("topk", dim, x);
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  BRISK_CHECK(k >= 0 && k <= n && (x.dim() > 0 || k == 1), "topk: k = ", k, " is out of range for dim ", dim,
              " of size ", n, " (input shape ", x.sizes(), ")");
  Shape os = x.sizes();
  if (x.dim() > 0) os[dim] = k;
  ValuesIndices r{empty(os, x.dtype(), x.device()), empty(os, DType::I64, x.device())};
  Tensor xc = contiguous(x);
  if (x.device().is_cuda())
    cuda::topk(xc, k, dim, largest, sorted, r.values, r.indices);
  else
    cpu::topk(xc, k, dim, largest, sorted, r.values, r.indices);
  return r;
}

Tensor take_along_dim_backward(const Tensor& grad, const Tensor& indices, int64_t dim, const Shape& in_sizes) {
  const char* op = "take_along_dim_backward";
  require_float(op, grad);
  BRISK_CHECK(indices.dtype() == DType::I64 && indices.sizes() == grad.sizes(), op, ": indices ", indices.sizes(), " ",
              dtype_name(indices.dtype()), " must be i64 with the grad's shape ", grad.sizes());
  BRISK_CHECK(grad.dim() == static_cast<int64_t>(in_sizes.size()), op, ": grad ", grad.sizes(), " and input ", in_sizes,
              " differ in rank");
  check_same_device(op, grad, indices);
  Tensor out = empty(in_sizes, grad.dtype(), grad.device());
  if (out.numel() > 0) {
    dim = wrap_dim_checked(op, dim, grad);
    // The kernels see both as (outer, n, inner): those products must agree.
    int64_t g_outer = 1, g_inner = 1, i_outer = 1, i_inner = 1;
    for (int64_t d = 0; d < grad.dim(); ++d) {
      if (d < dim) g_outer *= grad.size(d), i_outer *= in_sizes[d];
      if (d > dim) g_inner *= grad.size(d), i_inner *= in_sizes[d];
    }
    BRISK_CHECK(g_outer == i_outer && g_inner == i_inner, op, ": grad ", grad.sizes(), " and input ", in_sizes,
                " differ outside dim ", dim);
  }
  Tensor gc = contiguous(grad), ic = contiguous(indices);
  if (grad.device().is_cuda())
    cuda::take_along_dim_backward(gc, ic, dim, out);
  else
    cpu::take_along_dim_backward(gc, ic, dim, out);
  return out;
}

}  // namespace brisk::kernels
