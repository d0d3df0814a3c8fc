// GEMM on raw row-major pointers through OpenBLAS (when built in and usable: cpu/blas.cpp) or
// Eigen: operands are read in place (a transposed operand is a transposed map, never a copy).
// Threads never change the result: a product is cut into panels by a plan that depends only on
// (M, N, K), each panel is one single-threaded product (OpenBLAS with one thread, or Eigen's
// blocked GEMM, whose k-blocking depends only on K), and the panels are shared out over OpenMP
// threads. So every output element is accumulated over k in the same order on any thread count.
// Eigen's own OpenMP GEMM is never entered: its blocking sizes depend on the number of threads
// (computeProductBlockingSizes takes it as an argument, and kc shrinks with more threads), so it
// would sum k in another order on another thread count. gemm_serial calls Eigen's blocked GEMM
// routine directly, with the blocking Eigen computes for one thread.
// GCC 12 reports a false maybe-uninitialized inside its own AVX-512 intrinsics when Eigen's
// kernels are inlined here (-march=native); it is a known compiler false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>

#include <omp.h>

#include <algorithm>
#include <vector>

#include "brisk/kernels/linalg.h"
#include "brisk/util/error.h"
#include "cpu/linalg_kernels.h"

namespace brisk::kernels {

namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// The panel plan of a product, a function of (M, N, K) only. Below kSmallGemm multiply-adds a
// product is one panel (threads would cost more than they bring: 128^3 on 2 threads ran at 0.9x
// of 1 thread, 64^3 at 0.4x). Above, the larger of M and N (`dim`, at least 256) is cut into
// `count` panels of `step` rows or columns (a multiple of 8, so Eigen's register blocks stay
// whole). Each panel packs the other operand again, which one thread pays too (measured on
// 2048-wide products: 8 panels cost 6-10% of one thread's time), so count <= max(2, 1 + dim /
// kPanelDim): 2 panels up to 1535 wide, 4 at 2048, 8 at 4096. Each panel carries kPanelWork
// multiply-adds, and the count is one of 1, 2, 4, 6, 8, 12, 16, so that 2, 3, 4, 6 or 8 threads
// share the panels evenly.
constexpr int64_t kSmallGemm = int64_t{1} << 21;
constexpr int64_t kPanelWork = int64_t{1} << 20;
constexpr int64_t kPanelDim = 512;

struct PanelPlan {
  bool split_n = true;  // panels of columns of C (else of rows)
  int64_t step = 0, count = 1;
};

PanelPlan plan_panels(int64_t M, int64_t N, int64_t K) {
  PanelPlan p;
  p.split_n = N >= M;
  const int64_t dim = p.split_n ? N : M;
  p.step = dim;
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  if (work <= kSmallGemm || dim < 256) return p;
  const int64_t want = std::min(work / kPanelWork, std::max<int64_t>(2, 1 + dim / kPanelDim));
  int64_t count = 1;
  for (int64_t c : {2, 4, 6, 8, 12, 16})
    if (c <= want) count = c;
  p.step = (dim + count - 1) / count;
  p.step = (p.step + 7) / 8 * 8;
  p.count = (dim + p.step - 1) / p.step;
  return p;
}

// One product on the calling thread: C = alpha * op(A) op(B) + beta * C.
template <class T>
void gemm_serial_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                      int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K > 0 && alpha != T(0) && M + N + K >= 20 && cpu::blas_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
    return;
  MutMap<T> c(C, M, N, Eigen::OuterStride<>(ldc));
  if (beta == T(0))
    c.setZero();
  else if (beta != T(1))
    c *= beta;
  if (K == 0 || alpha == T(0)) return;
  if (M + N + K < 20) {
    // Tiny products: Eigen's coefficient-wise product (what its operator* picks for them too).
    ConstMap<T> a(A, ta ? K : M, ta ? M : K, Eigen::OuterStride<>(lda));
    ConstMap<T> b(B, tb ? N : K, tb ? K : N, Eigen::OuterStride<>(ldb));
    auto run = [&](const auto& opa, const auto& opb) { c.noalias() += alpha * opa.lazyProduct(opb); };
    if (!ta && !tb)
      run(a, b);
    else if (ta && !tb)
      run(a.transpose(), b);
    else if (!ta && tb)
      run(a, b.transpose());
    else
      run(a.transpose(), b.transpose());
    return;
  }
  // C += alpha * op(A) op(B) by Eigen's blocked GEMM on one thread (a null parallel-info
  // pointer), with the one-thread blocking. A row-major operand read transposed is a column-major
  // one with the same stride.
  using Eigen::Index;
  Eigen::internal::gemm_blocking_space<Eigen::RowMajor, T, T, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic> blocking(
      M, N, K, 1, true);
  auto run = [&]<int LhsOrder, int RhsOrder>() {
    Eigen::internal::general_matrix_matrix_product<Index, T, LhsOrder, false, T, RhsOrder, false, Eigen::RowMajor,
                                                   1>::run(M, N, K, A, lda, B, ldb, C, 1, ldc, alpha, blocking,
                                                           nullptr);
  };
  if (!ta && !tb)
    run.template operator()<Eigen::RowMajor, Eigen::RowMajor>();
  else if (ta && !tb)
    run.template operator()<Eigen::ColMajor, Eigen::RowMajor>();
  else if (!ta && tb)
    run.template operator()<Eigen::RowMajor, Eigen::ColMajor>();
  else
    run.template operator()<Eigen::ColMajor, Eigen::ColMajor>();
}

// Panel i of a product planned by p: the same columns (or rows) of op(B) (or op(A)) and C, computed
// by serial(m, n, A, B, C) on the panel's sizes and pointers.
template <class In, class Out, class Serial>
void run_panel(const PanelPlan& p, int64_t i, bool ta, bool tb, int64_t M, int64_t N, const In* A, int64_t lda,
               const In* B, int64_t ldb, Out* C, int64_t ldc, const Serial& serial) {
  const int64_t dim = p.split_n ? N : M, lo = i * p.step, len = std::min(dim, lo + p.step) - lo;
  if (p.split_n) {
    // Columns [lo, lo + len) of op(B): B's columns, or B's rows when transposed.
    serial(M, len, A, tb ? B + lo * ldb : B + lo, C + lo);
  } else {
    serial(len, N, ta ? A + lo : A + lo * lda, B, C + lo * ldc);
  }
}

template <class T>
void gemm_panel(const PanelPlan& p, int64_t i, bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  run_panel(p, i, ta, tb, M, N, A, lda, B, ldb, C, ldc, [&](int64_t m, int64_t n, const T* a, const T* b, T* c) {
    gemm_serial_impl<T>(ta, tb, m, n, K, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

void gemm_bf16_panel(const PanelPlan& p, int64_t i, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
                     int64_t ldc) {
  run_panel(p, i, ta, tb, M, N, A, lda, B, ldb, C, ldc,
            [&](int64_t m, int64_t n, const uint16_t* a, const uint16_t* b, float* c) {
              cpu::gemm_bf16_serial(ta, tb, m, n, K, a, lda, b, ldb, beta, c, ldc);
            });
}

template <class T>
void gemm_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const PanelPlan p = plan_panels(M, N, K);
#pragma omp parallel for schedule(static) if (p.count > 1 && !omp_in_parallel())
  for (int64_t i = 0; i < p.count; ++i) gemm_panel<T>(p, i, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void check_gemm_args(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  BRISK_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  const int64_t a_cols = ta ? M : K, b_cols = tb ? K : N;
  BRISK_CHECK(lda >= std::max<int64_t>(1, a_cols), "gemm: lda ", lda, " is smaller than A's row length ", a_cols);
  BRISK_CHECK(ldb >= std::max<int64_t>(1, b_cols), "gemm: ldb ", ldb, " is smaller than B's row length ", b_cols);
  BRISK_CHECK(ldc >= std::max<int64_t>(1, N), "gemm: ldc ", ldc, " is smaller than C's row length ", N);
}

// Runs panel(plan, panel index, matrix i) for every (matrix, panel) pair of a batch of products.
// Every pair is one task; each product is planned on its own sizes, so a matrix gets the same bits
// in a batch as alone, on any thread count.
template <class Panel>
void for_each_batch_panel(int64_t batch, int64_t M, int64_t N, int64_t K, const Panel& panel) {
  if (batch == 0 || M == 0 || N == 0) return;
  const PanelPlan p = plan_panels(M, N, K);
  const int64_t tasks = batch * p.count, work = M * N * std::max<int64_t>(K, 1);
#pragma omp parallel for schedule(static) if (tasks > 1 && batch * work > 32768 && !omp_in_parallel())
  for (int64_t t = 0; t < tasks; ++t) panel(p, t % p.count, t / p.count);
}

template <class T>
void bmm_impl(int64_t batch, int64_t M, int64_t N, int64_t K, const T* a, const int64_t* a_off, bool ta, int64_t lda,
              const T* b, const int64_t* b_off, bool tb, int64_t ldb, T* c) {
  for_each_batch_panel(batch, M, N, K, [&](const PanelPlan& p, int64_t j, int64_t i) {
    gemm_panel<T>(p, j, ta, tb, M, N, K, T(1), a + a_off[i], lda, b + b_off[i], ldb, T(0), c + i * M * N, N);
  });
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

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const BFloat16* A, int64_t lda,
          const BFloat16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  check_gemm_args<float>(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (cpu_bf16_dot()) {
    cpu::gemm_bf16(trans_a, trans_b, M, N, K, cpu::bits_of(A), lda, cpu::bits_of(B), ldb, beta, C, ldc);
    return;
  }
  // The stored matrices (with their row strides) as f32, then the f32 product.
  auto widen = [](const BFloat16* p, int64_t rows, int64_t cols, int64_t ld) {
    std::vector<float> v(static_cast<size_t>(rows * ld));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) v[r * ld + c] = static_cast<float>(p[r * ld + c]);
    return v;
  };
  const std::vector<float> a = widen(A, trans_a ? K : M, trans_a ? M : K, lda);
  const std::vector<float> b = widen(B, trans_b ? N : K, trans_b ? K : N, ldb);
  gemm_impl<float>(trans_a, trans_b, M, N, K, 1.0f, a.data(), lda, b.data(), ldb, beta, C, ldc);
}

namespace cpu {

void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_serial_impl<float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                 int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  gemm_serial_impl<double>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const float* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const float* b, const int64_t* b_off, bool trans_b, int64_t ldb, float* c) {
  bmm_impl<float>(batch, M, N, K, a, a_off, trans_a, lda, b, b_off, trans_b, ldb, c);
}
void bmm(int64_t batch, int64_t M, int64_t N, int64_t K, const double* a, const int64_t* a_off, bool trans_a,
         int64_t lda, const double* b, const int64_t* b_off, bool trans_b, int64_t ldb, double* c) {
  bmm_impl<double>(batch, M, N, K, a, a_off, trans_a, lda, b, b_off, trans_b, ldb, c);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const PanelPlan p = plan_panels(M, N, K);
#pragma omp parallel for schedule(static) if (p.count > 1 && !omp_in_parallel())
  for (int64_t i = 0; i < p.count; ++i) gemm_bf16_panel(p, i, trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void bmm_bf16(int64_t batch, int64_t M, int64_t N, int64_t K, const uint16_t* a, const int64_t* a_off, bool trans_a,
              int64_t lda, const uint16_t* b, const int64_t* b_off, bool trans_b, int64_t ldb, float* c) {
  for_each_batch_panel(batch, M, N, K, [&](const PanelPlan& p, int64_t j, int64_t i) {
    gemm_bf16_panel(p, j, trans_a, trans_b, M, N, K, a + a_off[i], lda, b + b_off[i], ldb, 0.0f, c + i * M * N, N);
  });
}

}  // namespace cpu

}  // namespace brisk::kernels
