// CPU batched matrix product behind kernels::matmul (internal header, not installed).
#pragma once
#include <cstdint>

namespace brisk::kernels::cpu {

// For each batch i: C_i (M, N) contiguous at c + i*M*N = op(A_i) * op(B_i), where A_i starts at
// a + a_off[i] and is read as gemm() reads it (trans_a, lda), likewise B_i. Batches run in
// parallel when the matrices are small; each output element is computed by one thread.
void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const float* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const float* b, const int64_t* b_off, bool trans_b, int64_t ldb, float* c);
void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const double* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const double* b, const int64_t* b_off, bool trans_b, int64_t ldb, double* c);

}  // namespace brisk::kernels::cpu
