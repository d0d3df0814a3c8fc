// Copies, casts and fills on one GPU. A same-dtype copy between two contiguous tensors of the
// same shape is one cudaMemcpyAsync; everything else runs the elementwise loop (vectorised when
// both sides are contiguous and aligned, strided otherwise), converting through the source's
// compute type as the CPU does.
#include "brisk/kernels/dispatch.h"
#include "cuda/copy.h"
#include "cuda/loops.cuh"

namespace brisk::kernels::cuda {

namespace {

// Functors, not device lambdas: nvcc does not allow extended lambdas inside the generic lambdas
// of the dtype visitors.
template <class A>
struct Identity {
  __device__ A operator()(A v) const { return v; }
};

template <class T>
struct FillValue {
  T value;
  __device__ T operator()() const { return value; }
};

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  OpScope scope("copy_", &dst, &src);
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous()) {
    brisk::cuda::DeviceGuard guard(dst.device().index);
    brisk::cuda::detail::memcpy_async(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                      brisk::cuda::detail::current_native_stream(dst.device().index), false);
    return;
  }
  visit_all(dst.dtype(), dst.device(), "copy_", [&](auto dtag) {
    using To = decltype(dtag);
    visit_all(src.dtype(), src.device(), "copy_", [&](auto stag) {
      using From = decltype(stag);
      brisk::cuda::detail::launch_elementwise<To, From>("copy", dst, {&src}, Identity<acc_t<From>>{});
    });
  });
}

void fill(const Tensor& t, double v) {
  OpScope scope("fill_", &t);
  visit_all(t.dtype(), t.device(), "fill_", [&](auto tag) {
    using T = decltype(tag);
    // Converted once on the host, exactly as the CPU fill converts.
    const T value = device::from_acc<T>(static_cast<acc_t<T>>(v));
    brisk::cuda::detail::launch_elementwise<T>("fill", t, {}, FillValue<T>{value});
  });
}

}  // namespace brisk::kernels::cuda
