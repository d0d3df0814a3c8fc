// sum, mean and prod on the GPU: the generic reduction (cuda/reduce_kernel.cuh) with sums in
// sum_acc_t (f64 for f32/f64, f32 for f16/bf16, i64 for integers and bool, as on the CPU).
#include "brisk/kernels/dispatch.h"
#include "cuda/reduce.h"
#include "cuda/reduce_kernel.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace kd = kernels::device;
using brisk::cuda::detail::reduce_plan_for;
using brisk::cuda::detail::run_reduce;

// out[o] = a (divided by n for mean), rounded to O once.
template <class S, class O>
struct SumStore {
  O* out;
  bool divide;
  int64_t n;
  __device__ void operator()(int64_t o, S a) const {
    if (divide) a /= static_cast<S>(n);
    out[o] = kd::from_acc<O>(a);
  }
};

// Floats keep their dtype; integers and bool give i64.
template <class T>
using sum_out_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, T, int64_t>;

template <class T>
void sum_like(const char* name, const Tensor& x, const std::vector<bool>& reduced, const Tensor& out, bool divide) {
  using S = kd::sum_acc_t<T>;
  using O = sum_out_t<T>;
  const kd::ReducePlan p = reduce_plan_for(x, reduced);
  run_reduce<T>(name, x, p, kd::SumReduce<S>{}, SumStore<S, O>{static_cast<O*>(out.data_ptr()), divide, p.n_red});
}

}  // namespace

void sum(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  OpScope scope("sum", &x);
  brisk::cuda::DeviceGuard guard(x.device().index);
  visit_all(x.dtype(), x.device(), "sum", [&](auto tag) { sum_like<decltype(tag)>("sum", x, reduced, out, false); });
}

void mean(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  OpScope scope("mean", &x);
  brisk::cuda::DeviceGuard guard(x.device().index);
  visit_float(x.dtype(), x.device(), "mean", [&](auto tag) { sum_like<decltype(tag)>("mean", x, reduced, out, true); });
}

void prod(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  OpScope scope("prod", &x);
  brisk::cuda::DeviceGuard guard(x.device().index);
  visit_all(x.dtype(), x.device(), "prod", [&](auto tag) {
    using T = decltype(tag);
    using S = kd::sum_acc_t<T>;
    using O = sum_out_t<T>;
    const kd::ReducePlan p = reduce_plan_for(x, reduced);
    run_reduce<T>("prod", x, p, kd::ProdReduce<S>{}, SumStore<S, O>{static_cast<O*>(out.data_ptr()), false, 1});
  });
}

}  // namespace brisk::kernels::cuda
