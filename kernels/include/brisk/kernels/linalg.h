// Matrix products: a raw row-major GEMM on pointers (f32/f64, through Eigen) and matmul/linear
// on tensors with PyTorch's shape rules. f16/bf16 compute in f32 and round once at the end.
#pragma once
#include <cstdint>

#include "brisk/core/tensor.h"

namespace brisk::kernels {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is (M, K): A is stored (M, K) with
// row stride lda, or (K, M) with row stride lda when trans_a. Likewise op(B) is (K, N) from B
// stored (K, N) or, when trans_b, (N, K), with row stride ldb. C is (M, N) with row stride ldc.
// beta == 0 overwrites C without reading it (NaNs in C do not propagate). Deterministic for a
// given OpenMP thread count.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// PyTorch's matmul: 1-D . 1-D is a dot product (0-D result); 2-D . 2-D a matrix product; a 1-D
// operand is promoted to a matrix (a row on the left, a column on the right) and that dim is
// removed from the result; N-D operands are batches of matrices whose batch dims broadcast.
// Any strides: a transposed (column-major) matrix is read in place, other layouts are copied.
// Same float dtype on both sides; the result is contiguous.
Tensor matmul(const Tensor& a, const Tensor& b);

// y = x W^T + b. x: (..., in) any strides; weight: (out, in); bias: (out) or undefined.
// y: (..., out) contiguous, one GEMM over all leading dims when x's rows allow it.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace brisk::kernels
