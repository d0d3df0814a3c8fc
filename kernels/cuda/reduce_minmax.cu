// amax/amin and max/min/argmax/argmin on the GPU: the generic reduction
// (cuda/reduce_kernel.cuh) with the combine ops of device/reduce.h. NaN wins, and among equal
// values the lowest reduced index (C order) wins, whatever the tree: the result is the CPU's
// exactly.
#include "brisk/kernels/dispatch.h"
#include "cuda/reduce.h"
#include "cuda/reduce_kernel.cuh"

namespace brisk::kernels::cuda {

namespace {

namespace kd = kernels::device;
using brisk::cuda::detail::reduce_plan_for;
using brisk::cuda::detail::run_reduce;

template <class T>
struct ValueStore {
  T* out;
  __device__ void operator()(int64_t o, acc_t<T> a) const { out[o] = kd::from_acc<T>(a); }
};

// values may be null (argmax/argmin).
template <class T>
struct ValueIndexStore {
  T* values;
  int64_t* indices;
  __device__ void operator()(int64_t o, kd::ValueIndex<acc_t<T>> a) const {
    if (values) values[o] = kd::from_acc<T>(a.value);
    indices[o] = a.index;
  }
};

template <bool Max>
void extreme(const char* op, const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  OpScope scope(op, &x);
  brisk::cuda::DeviceGuard guard(x.device().index);
  visit_numeric(x.dtype(), x.device(), op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    using Cmp = std::conditional_t<Max, kd::MaxOp<A>, kd::MinOp<A>>;
    run_reduce<T>(op, x, reduce_plan_for(x, reduced), kd::ExtremeReduce<Cmp, A>{},
                  ValueStore<T>{static_cast<T*>(out.data_ptr())});
  });
}

}  // namespace

void amax(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  extreme<true>("amax", x, reduced, out);
}
void amin(const Tensor& x, const std::vector<bool>& reduced, const Tensor& out) {
  extreme<false>("amin", x, reduced, out);
}

void arg_extreme(const char* op, const Tensor& x, const std::vector<bool>& reduced, bool is_max, const Tensor& values,
                 const Tensor& indices) {
  OpScope scope(op, &x);
  brisk::cuda::DeviceGuard guard(x.device().index);
  visit_numeric(x.dtype(), x.device(), op, [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const kd::ReducePlan p = reduce_plan_for(x, reduced);
    const ValueIndexStore<T> store{values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr,
                                   static_cast<int64_t*>(indices.data_ptr())};
    if (is_max)
      run_reduce<T>(op, x, p, kd::ArgReduce<kd::ArgMaxOp<A>, A>{}, store);
    else
      run_reduce<T>(op, x, p, kd::ArgReduce<kd::ArgMinOp<A>, A>{}, store);
  });
}

}  // namespace brisk::kernels::cuda
