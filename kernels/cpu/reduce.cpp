// CPU reductions. The reduced dims are moved innermost, so each output element is one
// sequential pass over its inputs: deterministic whatever the thread count.
#include "brisk/kernels/reduce.h"

#include <algorithm>
#include <numeric>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"

namespace brisk::kernels {

namespace {

struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape out_keep;             // output sizes with keepdim
  Shape out;                  // output sizes as requested
  Tensor perm;                // input with reduced dims last, contiguous
  int64_t outer = 1, inner = 1;
};

ReducePlan plan_reduce(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t nd = x.dim();
  ReducePlan p;
  p.reduced.assign(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, nd, op);
    if (nd == 0) continue;
    BRISK_CHECK(!p.reduced[w], op, ": dim ", d, " appears more than once in ", dims);
    p.reduced[w] = true;
  }
  std::vector<int64_t> order;
  for (int64_t d = 0; d < nd; ++d)
    if (!p.reduced[d]) order.push_back(d);
  for (int64_t d = 0; d < nd; ++d)
    if (p.reduced[d]) order.push_back(d);
  for (int64_t d = 0; d < nd; ++d) {
    p.out_keep.push_back(p.reduced[d] ? 1 : x.size(d));
    if (!p.reduced[d]) p.out.push_back(x.size(d));
    (p.reduced[d] ? p.inner : p.outer) *= x.size(d);
  }
  if (keepdim) p.out = p.out_keep;
  ViewMeta m = permute_meta(x.sizes(), x.strides(), x.offset(), order);
  p.perm = contiguous(x.as_strided(m.sizes, m.strides, m.offset));
  return p;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  BRISK_CHECK(x.device().is_cpu(), "sum: not implemented for ", dtype_name(x.dtype()), " on cuda");
  ReducePlan p = plan_reduce("sum", x, dims, keepdim);
  DType out_dt = x.is_floating_point() ? x.dtype() : DType::I64;
  Tensor out = empty(p.out, out_dt, x.device());
  visit_all(x.dtype(), x.device(), "sum", [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_floating_point_v<acc_t<T>>, acc_t<T>, int64_t>;
    using O = std::conditional_t<std::is_integral_v<T>, int64_t, T>;
    const T* src = static_cast<const T*>(p.perm.data_ptr());
    O* dst = static_cast<O*>(out.data_ptr());
    const int64_t inner = p.inner;
#pragma omp parallel for schedule(static) if (p.outer * inner > 65536 && p.outer > 1)
    for (int64_t o = 0; o < p.outer; ++o) {
      const T* row = src + o * inner;
      A acc = A(0);
      for (int64_t i = 0; i < inner; ++i) acc += static_cast<A>(row[i]);
      dst[o] = static_cast<O>(acc);
    }
  });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_float("mean", x);
  Tensor s = sum(x, dims, keepdim);
  const int64_t n = s.numel() == 0 ? 0 : x.numel() / std::max<int64_t>(s.numel(), 1);
  mul_scalar_(s, n == 0 ? 0.0 : 1.0 / static_cast<double>(n));
  return s;
}

}  // namespace brisk::kernels
