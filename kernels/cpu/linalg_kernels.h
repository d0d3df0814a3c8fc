// CPU batched matrix product behind kernels::matmul (internal header, not installed).
#pragma once
#include <cstdint>

namespace brisk::kernels::cpu {

// C = alpha * op(A) op(B) + beta * C as gemm() reads its arguments, on the calling thread only
// (Eigen's blocked GEMM with its one-thread blocking): the bits depend only on the operands and
// (M, N, K). For kernels that run their own parallel loops (convolution).
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                 int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// For each batch i: C_i (M, N) contiguous at c + i*M*N = op(A_i) * op(B_i), where A_i starts at
// a + a_off[i] and is read as gemm() reads it (trans_a, lda), likewise B_i. Batches run in
// parallel; each output element is computed by one thread, in an order fixed by (M, N, K).
void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const float* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const float* b, const int64_t* b_off, bool trans_b, int64_t ldb, float* c);
void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const double* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const double* b, const int64_t* b_off, bool trans_b, int64_t ldb, double* c);

}  // namespace brisk::kernels::cpu
