// The CPU GEMM library switch (see brisk/kernels/linalg.h, CpuGemm) and the OpenBLAS calls.
//
// Why OpenBLAS, and why only its pthread build: on the small GPT's products Eigen's blocked GEMM
// runs at about 68% of a Zen 3 core's FMA peak and OpenBLAS at about 91% (bench/RESULTS.md, "CPU
// GEMM library"). brisk keeps its own threading (panels planned from (M, N, K), each one call on
// one OpenMP thread), so it needs a BLAS that computes a call on the calling thread and can be
// called from several threads at once. Debian ships three builds of OpenBLAS 0.3.21: serial
// (USE_THREAD=0 without USE_LOCKING: its buffer allocator takes no lock, so concurrent calls
// race), OpenMP (a call outside a parallel region uses omp_get_max_threads() threads, and
// openblas_set_num_threads changes OpenMP's own thread count) and pthread (locked allocator, own
// thread pool). The pthread build with openblas_set_num_threads(1) runs every call on the
// caller's thread, safely from many threads. brisk links it with a RUNPATH to its folder, and
// checks at start-up (openblas_get_parallel) which build the loader actually gave it.
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "brisk/kernels/linalg.h"
#include "brisk/util/error.h"
#include "cpu/linalg_kernels.h"

#if BRISK_WITH_OPENBLAS
#include <cblas.h>
#endif

#include <Eigen/Core>

namespace brisk::kernels {

namespace {

struct Backend {
  Backend();
  bool openblas_usable = false;
  std::string openblas_line;  // version and build, or why it cannot be used
  std::string eigen_reason;   // why Eigen is the default although OpenBLAS is usable
  std::atomic<CpuGemm> current{CpuGemm::Eigen};
};

std::string eigen_line() {
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION);
}

// Decides once per process, at the first GEMM or query.
Backend::Backend() {
  Backend& s = *this;
#if BRISK_WITH_OPENBLAS
  const int parallel = openblas_get_parallel();
  std::string config = openblas_get_config();
  if (parallel == 1) {
    openblas_set_num_threads(1);
    s.openblas_usable = true;
    s.openblas_line = config + " (pthread build, 1 thread per call)";
  } else {
    s.openblas_line = config + (parallel == 0 ? " (serial build: unsafe to call from several threads)"
                                              : " (OpenMP build: would take over OpenMP's thread count)");
  }
#else
  s.openblas_line = "not built in (configure with Debian's libopenblas-pthread-dev installed)";
#endif
  s.current = s.openblas_usable ? CpuGemm::OpenBLAS : CpuGemm::Eigen;
#if BRISK_WITH_OPENBLAS && defined(__AVX512F__)
  // This build compiles Eigen for AVX-512. OpenBLAS picks its kernels by CPU model, and 0.3.21
  // gives CPUs it does not know (AMD Zen 4 and 5) its AVX2 ones: half the vector width. There
  // Eigen's AVX-512 GEMM is the faster library (bench/RESULTS.md, "CPU GEMM library"), so it is
  // the default; BRISK_BLAS=openblas still chooses OpenBLAS.
  if (s.openblas_usable) {
    std::string core = openblas_get_corename();
    for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool avx512_kernels = core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
    if (!avx512_kernels) {
      s.current = CpuGemm::Eigen;
      s.eigen_reason = "preferred: OpenBLAS runs its " + std::string(openblas_get_corename()) +
                       " (AVX2) kernels on this AVX-512 CPU";
    }
  }
#endif
  // The first GEMM may run inside a parallel region, where an exception would end the process:
  // a bad setting is a warning that says what was used instead.
  const char* env = std::getenv("BRISK_BLAS");
  const std::string want = env ? env : "";
  if (want == "eigen") {
    s.current = CpuGemm::Eigen;
  } else if (want == "openblas" && s.openblas_usable) {
    s.current = CpuGemm::OpenBLAS;
  } else if (want == "openblas" && !s.openblas_usable) {
    std::fprintf(stderr, "brisk: warning: BRISK_BLAS=openblas, but OpenBLAS cannot be used: %s; CPU GEMMs use %s\n",
                 s.openblas_line.c_str(), eigen_line().c_str());
  } else if (!want.empty() && want != "openblas") {
    std::fprintf(stderr,
                 "brisk: warning: BRISK_BLAS='%s' is not a CPU GEMM library (valid values: openblas, eigen); CPU "
                 "GEMMs use %s\n",
                 want.c_str(), s.current == CpuGemm::OpenBLAS ? "OpenBLAS" : eigen_line().c_str());
  }
#if BRISK_WITH_OPENBLAS
  if (!s.openblas_usable && want.empty())
    std::fprintf(stderr, "brisk: warning: the OpenBLAS loaded is %s; CPU GEMMs use %s instead\n",
                 s.openblas_line.c_str(), eigen_line().c_str());
#endif
}

Backend& backend() {
  static Backend b;
  return b;
}

}  // namespace

CpuGemm cpu_gemm() {
  return backend().current;
}

bool cpu_gemm_available(CpuGemm b) {
  return b == CpuGemm::Eigen || backend().openblas_usable;
}

void set_cpu_gemm(CpuGemm b) {
  Backend& s = backend();
  BRISK_CHECK(b == CpuGemm::Eigen || s.openblas_usable, "set_cpu_gemm: OpenBLAS cannot be used: ", s.openblas_line);
  s.current = b;
}

std::string cpu_gemm_description() {
  const Backend& s = backend();
  if (s.current == CpuGemm::OpenBLAS) return s.openblas_line;
  return eigen_line() + (s.eigen_reason.empty() ? "" : ", " + s.eigen_reason) + " (OpenBLAS: " + s.openblas_line + ")";
}

namespace cpu {

namespace {

// cblas_sgemm or cblas_dgemm, row-major, one thread; false when OpenBLAS is not the library in
// use or a size does not fit its 32-bit integers.
template <class T>
bool blas_gemm_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                    int64_t ldb, T beta, T* C, int64_t ldc) {
#if BRISK_WITH_OPENBLAS
  if (backend().current != CpuGemm::OpenBLAS || !fits_blas_int(M, N, K, lda, ldb, ldc)) return false;
  const auto opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const int la = static_cast<int>(lda), lb = static_cast<int>(ldb), lc = static_cast<int>(ldc);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, opa, opb, m, n, k, alpha, A, la, B, lb, beta, C, lc);
  else
    cblas_dgemm(CblasRowMajor, opa, opb, m, n, k, alpha, A, la, B, lb, beta, C, lc);
  return true;
#else
  (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb, (void)beta,
      (void)C, (void)ldc;
  return false;
#endif
}

}  // namespace

bool blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  return blas_gemm_impl<float>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
               const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  return blas_gemm_impl<double>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace cpu

}  // namespace brisk::kernels
