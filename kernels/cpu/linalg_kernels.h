// CPU batched matrix product behind kernels::matmul (internal header, not installed).
#pragma once
#include <cstdint>
#include <limits>

#include "brisk/core/half.h"

namespace brisk::kernels::cpu {

// Whether every size and leading dimension fits the 32-bit integers of the BLAS interface.
inline bool fits_blas_int(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return M <= kMax && N <= kMax && K <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax;
}

// C = alpha * op(A) op(B) + beta * C through the BLAS library on the calling thread (one
// thread per call), when it is the CPU GEMM in use (kernels::cpu_gemm()) and the sizes fit its
// integers; returns false, touching nothing, otherwise (the caller uses Eigen).
bool blas_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
bool blas_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
               const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// C = alpha * op(A) op(B) + beta * C as gemm() reads its arguments, on the calling thread only
// (OpenBLAS with one thread, or Eigen's blocked GEMM with its one-thread blocking): the bits
// depend only on the operands, (M, N, K) and the library. For kernels that run their own
// parallel loops (convolution).
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

// A bf16 array as its bits (without touching an element: the pointer may be null for an empty tensor).
inline const uint16_t* bits_of(const BFloat16* p) {
  return reinterpret_cast<const uint16_t*>(p);
}

// C (f32, row stride ldc) = op(A) op(B) + beta * C for bf16 A and B (their bits), with the CPU's
// bf16 dot-product instructions on the calling thread (cpu/gemm_bf16.cpp): only where
// kernels::cpu_bf16_dot_available(). beta == 0 overwrites C without reading it. Each element is
// summed over k in an order fixed by K alone.
void gemm_bf16_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                      const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc);

// gemm_bf16_serial's product, its panels shared out over the OpenMP threads as gemm() shares
// its own (the bits never depend on the thread count).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc);
// bmm() for bf16 operands and an f32 result.
void bmm_bf16(int64_t batch, int64_t M, int64_t N, int64_t K, const uint16_t* a, const int64_t* a_off, bool trans_a,
              int64_t lda, const uint16_t* b, const int64_t* b_off, bool trans_b, int64_t ldb, float* c);

}  // namespace brisk::kernels::cpu
