// var/std and logsumexp on the GPU. var/std take two passes of the generic reduction, as the
// CPU does: the means (in sum_acc_t), then the squared deviations from them. logsumexp is one
// pass of the online softmax state (running max and sum of exp(x - max), device/reduce.h).
#include "brisk/kernels/dispatch.h"
#include "cuda/reduce.h"
#include "cuda/reduce_kernel.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace kd = kernels::device;
using brisk::cuda::detail::reduce_plan_for;
using brisk::cuda::detail::run_reduce;

template <class S>
struct MeanStore {
  S* means;
  int64_t n;
  __device__ void operator()(int64_t o, S a) const { means[o] = a / static_cast<S>(n); }
};

template <class T, class S>
struct VarianceStore {
  T* out;
  double denom;
  bool take_sqrt;
  __device__ void operator()(int64_t o, S ss) const {
    out[o] = kd::from_acc<T>(kd::variance_result(ss, denom, take_sqrt));
  }
};

template <class T>
struct LogSumExpStore {
  T* out;
  __device__ void operator()(int64_t o, kd::SoftmaxState<acc_t<T>> s) const {
    out[o] = kd::from_acc<T>(kd::logsumexp_result(s));
  }
};

}  // namespace

void var(const Tensor& x, const std::vector<bool>& reduced, int64_t correction, bool take_sqrt, const Tensor& out) {
  const char* op = take_sqrt ? "std" : "var";
  OpScope scope(op, &x);
  brisk::cuda::DeviceGuard guard(x.device().index);
  visit_float(x.dtype(), x.device(), op, [&](auto tag) {
    using T = decltype(tag);
    using S = kd::sum_acc_t<T>;
    const kd::ReducePlan p = reduce_plan_for(x, reduced);
    if (p.n_out == 0) return;
    Tensor means = empty({p.n_out}, dtype_of_v<S>, x.device());
    S* pm = static_cast<S*>(means.data_ptr());
    run_reduce<T>(op, x, p, kd::SumReduce<S>{}, MeanStore<S>{pm, p.n_red});
    const double denom = static_cast<double>(std::max<int64_t>(0, p.n_red - correction));
    run_reduce<T>(op, x, p, kd::SquaredDevReduce<S>{pm},
                  VarianceStore<T, S>{static_cast<T*>(out.data_ptr()), denom, take_sqrt});
  });
}

void logsumexp(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  OpScope scope("logsumexp", &x);
  brisk::cuda::DeviceGuard guard(x.device().index);
  visit_float(x.dtype(), x.device(), "logsumexp", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    run_reduce<T>("logsumexp", x, reduce_plan_for(x, reduced), kd::LogSumExpReduce<A>{},
                  LogSumExpStore<T>{static_cast<T*>(out.data_ptr())});
  });
}

}  // namespace brisk::kernels::cuda
