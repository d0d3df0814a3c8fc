// cuBLAS and cuBLASLt loaded on first use (dlopen) instead of linked: libcublasLt's static
// initialisers take about 0.5 s of CPU in every process that loads it, GPU or not, and every
// brisk program and test process would pay it (docs/testing.md, "Where the time goes").
//
// Each function brisk calls is defined here under the library's own name, hidden (visible inside
// libbrisk_kernels only, so a program that links cuBLAS itself keeps the real one), and forwards
// to the library's symbol, resolved once. A function the kernels start to use must be added here:
// the link of libbrisk_kernels fails ("undefined reference") until it is.
#include <dlfcn.h>

#include <string>

#include "brisk/util/error.h"
#include "cuda/library.h"

#define BRISK_BLAS_HIDDEN __attribute__((visibility("hidden")))
// The symbol's name after cublas_v2.h's renames (cublasCreate -> cublasCreate_v2).
#define BRISK_BLAS_NAME_(name) #name
#define BRISK_BLAS_NAME(name) BRISK_BLAS_NAME_(name)

namespace brisk::cuda::detail {
namespace {

enum class BlasLibrary { Cublas, CublasLt };

// The library by its soname (found the way the dynamic linker would: LD_LIBRARY_PATH, the
// RUNPATH of libbrisk_kernels, which names the CUDA toolkit's folder, ld.so.cache), else at the
// path CMake found at configure time.
void* open_library(BlasLibrary which) {
  const bool lt = which == BlasLibrary::CublasLt;
  const std::string soname = std::string(lt ? "libcublasLt.so." : "libcublas.so.") + std::to_string(CUBLAS_VER_MAJOR);
  if (void* h = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const std::string first_error = ::dlerror();
  const char* configured = lt ? BRISK_CUBLASLT_PATH : BRISK_CUBLAS_PATH;
  if (void* h = ::dlopen(configured, RTLD_NOW | RTLD_LOCAL)) return h;
  BRISK_THROW("CUDA matmul: could not load ", soname, " (", first_error, "), nor ", configured, " (", ::dlerror(),
              "): install the CUDA toolkit's cuBLAS ", CUBLAS_VER_MAJOR,
              ".x or add the folder that holds it to LD_LIBRARY_PATH");
}

void* library(BlasLibrary which) {
  if (which == BlasLibrary::Cublas) {
    static void* const cublas = open_library(BlasLibrary::Cublas);
    return cublas;
  }
  static void* const cublas_lt = open_library(BlasLibrary::CublasLt);
  return cublas_lt;
}

template <class F>
F symbol(BlasLibrary which, const char* name) {
  void* lib = library(which);
  void* f = ::dlsym(lib, name);
  BRISK_CHECK(f != nullptr, "CUDA matmul: ", name, " not found in the loaded cuBLAS (", ::dlerror(),
              "): brisk was built against cuBLAS ", CUBLAS_VER_MAJOR, ".", CUBLAS_VER_MINOR,
              "; put that version (or a newer one of the same major) first on LD_LIBRARY_PATH");
  return reinterpret_cast<F>(f);
}

}  // namespace
}  // namespace brisk::cuda::detail

// One forwarding definition: `ret name params` as declared in the cuBLAS headers. The arguments
// are pieces of a declaration, not expressions, so they cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define BRISK_BLAS_FORWARD(lib, ret, name, params, args)                                                           \
  extern "C" BRISK_BLAS_HIDDEN ret name params {                                                                   \
    static const auto fn = ::brisk::cuda::detail::symbol<decltype(&name)>(::brisk::cuda::detail::BlasLibrary::lib, \
                                                                          BRISK_BLAS_NAME(name));                  \
    return fn args;                                                                                                \
  }
// NOLINTEND(bugprone-macro-parentheses)

// cuBLAS (library.cpp, matmul.cpp).
BRISK_BLAS_FORWARD(Cublas, cublasStatus_t, cublasCreate, (cublasHandle_t * handle), (handle))
BRISK_BLAS_FORWARD(Cublas, cublasStatus_t, cublasSetWorkspace,
                   (cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes),
                   (handle, workspace, workspaceSizeInBytes))
BRISK_BLAS_FORWARD(Cublas, cublasStatus_t, cublasSetStream, (cublasHandle_t handle, cudaStream_t streamId),
                   (handle, streamId))
BRISK_BLAS_FORWARD(Cublas, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode),
                   (handle, mode))
BRISK_BLAS_FORWARD(Cublas, const char*, cublasGetStatusString, (cublasStatus_t status), (status))
BRISK_BLAS_FORWARD(Cublas, const char*, cublasGetStatusName, (cublasStatus_t status), (status))
BRISK_BLAS_FORWARD(Cublas, cublasStatus_t, cublasGemmStridedBatchedEx_64,
                   (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n,
                    int64_t k, const void* alpha, const void* A, cudaDataType Atype, int64_t lda, long long int strideA,
                    const void* B, cudaDataType Btype, int64_t ldb, long long int strideB, const void* beta, void* C,
                    cudaDataType Ctype, int64_t ldc, long long int strideC, int64_t batchCount,
                    cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                   (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                    Ctype, ldc, strideC, batchCount, computeType, algo))

// cuBLASLt (library.cpp, matmul.cpp).
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * lightHandle), (lightHandle))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t lightHandle), (lightHandle))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmul,
                   (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
                    cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                    const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                    const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                    cudaStream_t stream),
                   (lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                    workspaceSizeInBytes, stream))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                   (cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
                    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
                   (lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
                    heuristicResultsArray, returnAlgoCount))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmulDescCreate,
                   (cublasLtMatmulDesc_t * matmulDesc, cublasComputeType_t computeType, cudaDataType_t scaleType),
                   (matmulDesc, computeType, scaleType))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t matmulDesc), (matmulDesc))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
                   (cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                    size_t sizeInBytes),
                   (matmulDesc, attr, buf, sizeInBytes))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref),
                   (pref))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                   (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                    size_t sizeInBytes),
                   (pref, attr, buf, sizeInBytes))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatrixLayoutCreate,
                   (cublasLtMatrixLayout_t * matLayout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                   (matLayout, type, rows, cols, ld))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t matLayout),
                   (matLayout))
BRISK_BLAS_FORWARD(CublasLt, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
                   (cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                    size_t sizeInBytes),
                   (matLayout, attr, buf, sizeInBytes))
