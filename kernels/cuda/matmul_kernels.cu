// The linalg family's own kernel: GELU (tanh approximation) applied after a GEMM when cuBLASLt
// cannot fuse it into the GEMM's epilogue (f64, shapes its heuristics reject).
#include "brisk/kernels/dispatch.h"
#include "cuda/loops.cuh"
#include "cuda/matmul.h"

namespace brisk::kernels::cuda::detail {

namespace {

// The CPU's formula (kernels/cpu/elementwise.cpp), in the compute type.
template <class A>
struct GeluTanh {
  __device__ A operator()(A v) const {
    const A k = A(0.7978845608028654);  // sqrt(2 / pi)
    return A(0.5) * v * (A(1) + tanh(k * (v + A(0.044715) * v * v * v)));
  }
};

}  // namespace

void gelu_tanh_(const Tensor& t) {
  visit_float(t.dtype(), t.device(), "linear (gelu epilogue)", [&](auto tag) {
    using T = decltype(tag);
    // In place: each element is read and written by the same thread.
    brisk::cuda::detail::launch_elementwise<T, T>("gelu_tanh", t, {&t}, GeluTanh<acc_t<T>>{});
  });
}

}  // namespace brisk::kernels::cuda::detail
