// Matrix products: a raw row-major GEMM on pointers (f32/f64, through OpenBLAS or Eigen) and
// matmul/linear on tensors with PyTorch's shape rules. f16/bf16 compute in f32 and round once at
// the end.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "brisk/core/enums.h"
#include "brisk/core/tensor.h"

namespace brisk::kernels {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is (M, K): A is stored (M, K) with
// row stride lda, or (K, M) with row stride lda when trans_a. Likewise op(B) is (K, N) from B
// stored (K, N) or, when trans_b, (N, K), with row stride ldb. C is (M, N) with row stride ldc.
// beta == 0 overwrites C without reading it (NaNs in C do not propagate). The result's bits
// depend only on the operands and (M, N, K), never on the OpenMP thread count. Host pointers
// only: on the GPU, use matmul and linear.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// C (f32) = op(A) op(B) + beta * C for bf16 A and B, laid out as gemm() reads them: with the CPU's
// bf16 dot-product instructions when cpu_bf16_dot() (below), else by converting A and B to f32
// and calling the f32 gemm. Like gemm(), beta == 0 never reads C and the bits do not depend on
// the thread count.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const BFloat16* A, int64_t lda,
          const BFloat16* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Which library computes the CPU GEMMs (every matmul, linear and convolution on the CPU). brisk
// cuts each product into panels planned from (M, N, K) alone and gives each panel to one
// single-threaded call of the library, so the choice changes speed and the last bits of results,
// never their independence from the thread count (docs/how-brisk-works.md, "Determinism").
//   OpenBLAS: when brisk was built against Debian's libopenblas-pthread-dev (the default when it
//     is installed; CMake option BRISK_BLAS), unless Eigen is compiled for AVX-512 and OpenBLAS
//     runs its AVX2 kernels on this CPU (OpenBLAS 0.3.21 on AMD Zen 4/5): then Eigen is faster
//     and the default. It runs with one thread per call (brisk calls
//     openblas_set_num_threads(1)); a serial or OpenMP build of OpenBLAS loaded in its place is
//     not used (a serial build is unsafe to call from several threads, an OpenMP one would take
//     over the OpenMP thread count), and Eigen takes over with a warning.
//   Eigen: always available.
// The environment variable BRISK_BLAS=eigen (or openblas) picks one when the process starts.
enum class CpuGemm : uint8_t { OpenBLAS, Eigen };
// The library in use now.
CpuGemm cpu_gemm();
// Switches the library (e.g. to compare the two in one process); throws brisk::Error when
// OpenBLAS is asked for and cannot be used, saying why. Not while GEMMs are running on other threads.
void set_cpu_gemm(CpuGemm backend);
// Whether OpenBLAS can be used in this process.
bool cpu_gemm_available(CpuGemm backend);
// A line for reports: the library in use, its version and configuration, e.g.
// "OpenBLAS 0.3.21 (pthread build, 1 thread per call; DYNAMIC_ARCH ... Zen)".
std::string cpu_gemm_description();

// bf16 products on the CPU. Where the CPU has bf16 dot-product instructions (AVX512_BF16, e.g.
// Intel Cooper Lake and Sapphire Rapids, AMD Zen 4 and later; found at run time), matmul and linear
// on bf16 CPU tensors multiply the bf16 values directly with brisk's own kernel: each product is
// exact, the sums are f32 over k in an order fixed by K (never by the thread count), denormal
// inputs and results are flushed to zero, and the result is rounded to bf16 once. Elsewhere, or
// when switched off, both operands are converted to f32 and the f32 GEMM runs (the two paths
// agree to f32 rounding, not bit for bit). BRISK_CPU_BF16_DOT=0 (read at the first bf16 product)
// switches it off; BRISK_CPU_BF16_DOT=1 on a CPU without the instructions is an error.
bool cpu_bf16_dot_available();
// Whether bf16 products use the instructions now.
bool cpu_bf16_dot();
// Switches them on or off (on throws brisk::Error where the CPU lacks them). Not while products run.
void set_cpu_bf16_dot(bool on);

// PyTorch's matmul: 1-D . 1-D is a dot product (0-D result); 2-D . 2-D a matrix product; a 1-D
// operand is promoted to a matrix (a row on the left, a column on the right) and that dim is
// removed from the result; N-D operands are batches of matrices whose batch dims broadcast.
// Any strides: a transposed (column-major) matrix is read in place, other layouts are copied.
// Same float dtype on both sides; the result is contiguous. On the GPU: cuBLASLt for f32, f16
// and bf16 (fp32 accumulation; TF32 only when cuda::matmul_allow_tf32()), cuBLAS for f64;
// batch dims that one stride cannot describe are copied expanded to the full batch.
Tensor matmul(const Tensor& a, const Tensor& b);

// What linear applies to x W^T + b before returning it.
enum class LinearEpilogue : uint8_t {
  None,
  // GELU, tanh approximation (PyTorch's gelu(approximate="tanh")), computed in f32 (f64 for f64)
  // before the result is rounded to a 16-bit dtype. On the GPU it runs inside cuBLASLt's GEMM
  // (its GELU epilogue) where cuBLASLt offers one for the shapes, else as a separate pass.
  GeluTanh,
};

// y = epilogue(x W^T + b). x: (..., in) any strides; weight: (out, in); bias: (out) or undefined.
// y: (..., out) contiguous, one GEMM over all leading dims when x's rows allow it. On the GPU the
// bias is added by the GEMM itself (cuBLASLt's bias epilogue) where the shapes allow.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
              LinearEpilogue epilogue = LinearEpilogue::None);

// The first product of a GELU MLP when training: out = gelu_tanh(x W^T + b) and pre = x W^T + b,
// the pre-activation GELU's backward reads (both (..., out_features), contiguous, x's dtype; bias
// may be undefined). On the GPU one cuBLASLt call writes both (its GELU_AUX_BIAS epilogue: bias
// and GELU in the epilogue, pre as the auxiliary output) where cuBLASLt accepts it, else (see
// gelu_epilogue_fallback_reason) linear then GELU, the values of the CPU's computation.
struct LinearGeluAux {
  Tensor out;
  Tensor pre;
};
LinearGeluAux linear_gelu_aux(const Tensor& x, const Tensor& weight, const Tensor& bias);

// GELU's backward fused into the product that feeds it: grad_pre = (grad W) * gelu_tanh'(pre) with
// grad (..., out), weight (out, in), pre (..., in) as linear_gelu_aux left it; and, when
// `bias_grad`, grad_bias (in) = grad_pre summed over its rows (the gradient of the bias that made
// pre). On the CPU: the product, GELU's backward and a ones-vector product for the sum, each as
// the unfused ops compute them (the same bits). On the GPU one cuBLASLt call with the
// DGELU_BGRAD (or DGELU) epilogue where cuBLASLt accepts it, else those three steps.
struct MatmulDgelu {
  Tensor grad_pre;
  Tensor grad_bias;
};
MatmulDgelu matmul_dgelu(const Tensor& grad, const Tensor& weight, const Tensor& pre, bool bias_grad);

// How matmul_dgelu runs on the GPU: the environment variable BRISK_CUDA_DGELU_EPILOGUE, read at
// each call (dgelu when unset):
//   dgelu  cuBLASLt's DGELU epilogue, the bias gradient as a ones-vector product (the default);
//   bgrad  one cuBLASLt call with the DGELU_BGRAD epilogue (the bias gradient too), else DGELU;
//   off    no epilogue: the product, GELU's backward kernel and the ones-vector product (the CPU's
//          steps).
// On an H200 cuBLASLt runs DGELU_BGRAD as a product plus a separate pass (4.0 ms of GPT-2 124M's
// 37 ms step); GPT-2's step with dgelu took 34.7 ms, off 35.2, bgrad 37.5 (bench/RESULTS.md).
// Anything else throws brisk::Error naming the variable and the valid values (parse_enum).
enum class DgeluEpilogue : uint8_t { Bgrad, Dgelu, Off };
DgeluEpilogue dgelu_epilogue();

// Why the calling thread's last linear_gelu_aux or matmul_dgelu on the GPU did not run as one
// cuBLASLt call with the GELU epilogue (f64, a single row, column or product dim, out_features
// not a multiple of 8, a product too large for 32-bit sizes, or cuBLASLt offering no algorithm);
// "" when it did, or when the last one ran on the CPU.
std::string gelu_epilogue_fallback_reason();

}  // namespace brisk::kernels

namespace brisk {
template <>
struct EnumNames<kernels::DgeluEpilogue> {
  static constexpr std::array<std::pair<std::string_view, kernels::DgeluEpilogue>, 3> values{
      {{"dgelu", kernels::DgeluEpilogue::Dgelu},
       {"bgrad", kernels::DgeluEpilogue::Bgrad},
       {"off", kernels::DgeluEpilogue::Off}}};
};
}  // namespace brisk
