// CUDA entry points of the linalg family (internal): matmul and linear through cuBLASLt (f32,
// f16, bf16) and cuBLAS (f64). See cuda/api.h for the conventions.
#pragma once
#include "brisk/core/tensor.h"
#include "brisk/kernels/linalg.h"
#include "cuda/api.h"

namespace brisk::kernels::cuda {

BRISK_CUDA_API_BEGIN
// out (batch..., M, N) contiguous = a (batch_a..., M, K) @ b (batch_b..., K, N). a and b are at
// least 2-D (1-D operands promoted to a row or column view by the caller), any strides, batch
// dims broadcastable (checked by the caller), same float dtype as out.
BRISK_CUDA_FN void matmul(const Tensor& a, const Tensor& b, const Tensor& out) BRISK_CUDA_BODY;
// out (rows, out_f) contiguous = epilogue(x (rows, in) @ wt (in, out_f) + bias (out_f)); x and wt
// any strides (wt is usually the weight's .t() view), bias undefined or 1-D, all one dtype.
BRISK_CUDA_FN void linear(const Tensor& x, const Tensor& wt, const Tensor& bias, LinearEpilogue epilogue,
                          const Tensor& out) BRISK_CUDA_BODY;
// linear_gelu_aux and matmul_dgelu (brisk/kernels/linalg.h) as one cuBLASLt call each. Operands
// as linear's (x (rows, in) and wt (in, out_f) any strides, bias undefined or 1-D) and matmul's
// (grad (rows, out) @ w (out, in)); out, pre, grad_pre contiguous (rows, n); grad_bias
// undefined or contiguous (in). Return nullptr when done, else why cuBLASLt's GELU epilogue
// could not be used, having written nothing (the caller then runs the unfused ops).
BRISK_CUDA_FN const char* linear_gelu_aux(const Tensor& x, const Tensor& wt, const Tensor& bias, const Tensor& out,
                                          const Tensor& pre) BRISK_CUDA_BODY;
BRISK_CUDA_FN const char* matmul_dgelu(const Tensor& grad, const Tensor& w, const Tensor& pre, const Tensor& grad_pre,
                                       const Tensor& grad_bias) BRISK_CUDA_BODY;
BRISK_CUDA_API_END
#if defined(BRISK_WITH_CUDA)
namespace detail {
// t = gelu_tanh(t) in place (t contiguous, float dtype): the epilogue when cuBLASLt cannot fuse it.
void gelu_tanh_(const Tensor& t);
}  // namespace detail
#endif

}  // namespace brisk::kernels::cuda
