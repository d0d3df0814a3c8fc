// GEMM through Eigen on raw row-major pointers: operands are mapped in place (a transposed
// operand is a transposed map, never a copy), and Eigen's OpenMP GEMM does the blocking.
// GCC 12 reports a false maybe-uninitialized inside its own AVX-512 intrinsics when Eigen's
// kernels are inlined here (-march=native); it is a known compiler false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>

#include <omp.h>

#include "brisk/core/error.h"
#include "brisk/kernels/linalg.h"
#include "cpu/linalg_kernels.h"

namespace brisk::kernels {

namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// Below this many multiply-adds per matrix, a batch is split over threads rather than each
// product over Eigen's threads, and a single product runs on one thread (Eigen's threads cost
// more than they bring there: 128^3 on 2 threads ran at 0.9x of 1 thread, 64^3 at 0.4x).
constexpr int64_t kSmallGemm = int64_t{1} << 21;

// Eigen follows OpenMP's per-thread thread count; small products get one thread.
class SerialIfSmall {
 public:
  explicit SerialIfSmall(int64_t work) {
    if (work <= kSmallGemm && !omp_in_parallel() && omp_get_max_threads() > 1) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(1);
    }
  }
  ~SerialIfSmall() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  SerialIfSmall(const SerialIfSmall&) = delete;
  SerialIfSmall& operator=(const SerialIfSmall&) = delete;

 private:
  int saved_ = 0;
};

template <class T>
void gemm_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  MutMap<T> c(C, M, N, Eigen::OuterStride<>(ldc));
  if (K == 0 || alpha == T(0)) {
    if (beta == T(0)) c.setZero();
    else if (beta != T(1)) c *= beta;
    return;
  }
  SerialIfSmall serial(M * N * K);
  ConstMap<T> a(A, ta ? K : M, ta ? M : K, Eigen::OuterStride<>(lda));
  ConstMap<T> b(B, tb ? N : K, tb ? K : N, Eigen::OuterStride<>(ldb));
  auto run = [&](const auto& opa, const auto& opb) {
    if (beta == T(0)) {
      if (alpha == T(1)) c.noalias() = opa * opb;
      else c.noalias() = alpha * opa * opb;
    } else {
      if (beta != T(1)) c *= beta;
      if (alpha == T(1)) c.noalias() += opa * opb;
      else c.noalias() += alpha * opa * opb;
    }
  };
  if (!ta && !tb) run(a, b);
  else if (ta && !tb) run(a.transpose(), b);
  else if (!ta && tb) run(a, b.transpose());
  else run(a.transpose(), b.transpose());
}

template <class T>
void check_gemm_args(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  BRISK_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  const int64_t a_cols = ta ? M : K, b_cols = tb ? K : N;
  BRISK_CHECK(lda >= std::max<int64_t>(1, a_cols), "gemm: lda ", lda, " is smaller than A's row length ", a_cols);
  BRISK_CHECK(ldb >= std::max<int64_t>(1, b_cols), "gemm: ldb ", ldb, " is smaller than B's row length ", b_cols);
  BRISK_CHECK(ldc >= std::max<int64_t>(1, N), "gemm: ldc ", ldc, " is smaller than C's row length ", N);
}

template <class T>
void bmm_impl(int64_t batch, int64_t M, int64_t N, int64_t K, const T* a, const int64_t* a_off, bool ta, int64_t lda,
              const T* b, const int64_t* b_off, bool tb, int64_t ldb, T* c) {
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  const bool over_batch = batch > 1 && (work < kSmallGemm || batch >= omp_get_max_threads());
  if (over_batch) {
    // Eigen runs serially inside a parallel region, so each product stays on one thread.
#pragma omp parallel for schedule(static) if (batch * work > 32768)
    for (int64_t i = 0; i < batch; ++i)
      gemm_impl<T>(ta, tb, M, N, K, T(1), a + a_off[i], lda, b + b_off[i], ldb, T(0), c + i * M * N, N);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    gemm_impl<T>(ta, tb, M, N, K, T(1), a + a_off[i], lda, b + b_off[i], ldb, T(0), c + i * M * N, N);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_gemm_args<float>(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  gemm_impl<float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  check_gemm_args<double>(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  gemm_impl<double>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

namespace cpu {

void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const float* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const float* b, const int64_t* b_off, bool trans_b, int64_t ldb, float* c) {
  bmm_impl<float>(batch, M, N, K, a, a_off, trans_a, lda, b, b_off, trans_b, ldb, c);
}
void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const double* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const double* b, const int64_t* b_off, bool trans_b, int64_t ldb, double* c) {
  bmm_impl<double>(batch, M, N, K, a, a_off, trans_a, lda, b, b_off, trans_b, ldb, c);
}

}  // namespace cpu

}  // namespace brisk::kernels
