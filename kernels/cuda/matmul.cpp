// matmul and linear on the GPU. plan_matmul (brisk/kernels/matmul_plan.h) decides how each
// operand is read (in place, transposed, or copied once); one strided-batched call then computes
// the whole product: cuBLASLt for f32, f16 and bf16 (fp32 compute and accumulation, TF32 only
// when cuda::matmul_allow_tf32()), cuBLAS's GemmStridedBatchedEx for f64 and wherever cuBLASLt
// has no algorithm. linear adds its bias (and GELU) in cuBLASLt's epilogue where it can, else
// it preloads the output with the bias (beta = 1) and runs GELU as a separate pass. The GELU MLP's
// training products (linear_gelu_aux, matmul_dgelu) use the epilogues with an auxiliary matrix:
// GELU_AUX_BIAS writes the pre-activation beside gelu(x W^T + b), DGELU(_BGRAD) reads it back.
#include "cuda/matmul.h"

#include <limits>

#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/matmul_plan.h"
#include "cuda/library.h"

namespace brisk::kernels::cuda {

namespace {

namespace bd = brisk::cuda::detail;

cudaDataType_t blas_type(DType dt) {
  switch (dt) {
    case DType::F64:
      return CUDA_R_64F;
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      throw_not_implemented("matmul", dt, Device{DeviceKind::CUDA, 0});
  }
}

// RAII owners of cuBLASLt descriptors (host objects: creating them needs no GPU).
struct LtMatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  LtMatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
    BRISK_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, compute, scale));
  }
  ~LtMatmulDesc() { cublasLtMatmulDescDestroy(d); }
  template <class V>
  void set(cublasLtMatmulDescAttributes_t attr, const V& v) {
    BRISK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
  }
  LtMatmulDesc(const LtMatmulDesc&) = delete;
  LtMatmulDesc& operator=(const LtMatmulDesc&) = delete;
};

struct LtLayout {
  cublasLtMatrixLayout_t l = nullptr;
  // A column-major (rows, cols) matrix with leading dimension ld; `batch` of them, `stride` apart.
  LtLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    BRISK_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
    if (batch > 1) {
      const auto count = static_cast<int32_t>(batch);
      BRISK_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      const int64_t s = stride;
      BRISK_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof(s)));
    }
  }
  ~LtLayout() { cublasLtMatrixLayoutDestroy(l); }
  LtLayout(const LtLayout&) = delete;
  LtLayout& operator=(const LtLayout&) = delete;
};

struct LtPreference {
  cublasLtMatmulPreference_t p = nullptr;
  LtPreference() { BRISK_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p)); }
  ~LtPreference() { cublasLtMatmulPreferenceDestroy(p); }
  template <class V>
  void set(cublasLtMatmulPreferenceAttributes_t attr, const V& v) {
    BRISK_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)));
  }
  LtPreference(const LtPreference&) = delete;
  LtPreference& operator=(const LtPreference&) = delete;
};

// One planned product: a and b as the plan reads them (copies already made), c contiguous.
struct Gemm {
  const MatmulPlan* plan = nullptr;
  DType dtype = DType::F32;
  const void* a = nullptr;  // the left operand: the BLAS's second operand
  const void* b = nullptr;  // the right operand: the BLAS's first operand
  void* c = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;
};

cublasOperation_t op(bool trans) {
  return trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

bool f32_uses_tf32(DType dt) {
  return dt == DType::F32 && brisk::cuda::matmul_allow_tf32();
}

// What cuBLASLt does after the product. bias: (m) contiguous, read by the BIAS epilogues, written
// (the sum over the output's n columns) by DGELU_BGRAD. aux: an (m, n) column-major matrix with
// leading dimension aux_ld, in the output's dtype: written by GELU_AUX(_BIAS) (the GELU's input),
// read by DGELU(_BGRAD).
struct LtEpilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  const void* aux = nullptr;
  int64_t aux_ld = 0;
};

// The epilogue as cublasLt.h names it, less its CUBLASLT_EPILOGUE_ prefix (recording mode's log).
const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
      return "DEFAULT";
    case CUBLASLT_EPILOGUE_BIAS:
      return "BIAS";
    case CUBLASLT_EPILOGUE_GELU:
      return "GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS:
      return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX:
      return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU:
      return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
      return "DGELU_BGRAD";
    default:
      return "OTHER";
  }
}

void set_epilogue(LtMatmulDesc& desc, const LtEpilogue& e) {
  if (e.kind == CUBLASLT_EPILOGUE_DEFAULT) return;
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(e.kind));
  if (e.bias) desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, e.bias);
  if (e.aux) {
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, e.aux);
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, e.aux_ld);
  }
}

// Runs g through cuBLASLt with epilogue `e`. Returns false, having enqueued nothing, when cuBLASLt
// offers no algorithm for it; throws on any other failure. beta = 1 accumulates onto what c holds.
bool lt_gemm(const Gemm& g, const LtEpilogue& e, bool accumulate) {
  const MatmulPlan& p = *g.plan;
  const cudaDataType_t type = blas_type(g.dtype);
  LtMatmulDesc desc(f32_uses_tf32(g.dtype) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(op(p.b.trans)));
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(op(p.a.trans)));
  set_epilogue(desc, e);
  LtLayout la(type, p.b.rows, p.b.cols, p.b.ld, p.batch_count, p.b.batch_stride);
  LtLayout lb(type, p.a.rows, p.a.cols, p.a.ld, p.batch_count, p.a.batch_stride);
  LtLayout lc(type, p.m, p.n, p.ldc, p.batch_count, p.stride_c);
  if (bd::recording_library_call("cublasLtMatmul", g.stream, epilogue_name(e.kind))) return true;

  cublasLtHandle_t handle = bd::cublaslt_handle(g.device);
  Tensor ws = bd::try_workspace(g.device, bd::blas_workspace_bytes(g.device));
  const uint64_t ws_bytes = ws.defined() ? ws.nbytes() : 0;
  LtPreference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws_bytes);
  // The heuristic assumes 256-byte aligned pointers unless told otherwise; views can start anywhere.
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, bd::pointer_alignment(g.b));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, bd::pointer_alignment(g.a));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, bd::pointer_alignment(g.c));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, bd::pointer_alignment(g.c));
  if (g.dtype != DType::F32 && !brisk::cuda::matmul_allow_reduced_precision_reduction()) {
    // 16-bit outputs with reduced-precision reductions off: split-K partial sums stay in fp32.
    pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
             static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle, desc.d, la.l, lb.l, lc.l, lc.l, pref.p, 1, &result, &found);
  // NOT_SUPPORTED: no kernel for this problem. INVALID_VALUE: what the heuristic answers for some
  // epilogue shapes (a matrix with one row or column); cuBLAS then runs the plain product, and a
  // truly bad layout still fails there with cuBLAS's own error.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_INVALID_VALUE && e.kind != CUBLASLT_EPILOGUE_DEFAULT))
    return false;
  BRISK_CUBLAS_CHECK(st);
  if (found == 0) return false;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  BRISK_CUBLAS_CHECK(cublasLtMatmul(handle, desc.d, &alpha, g.b, la.l, g.a, lb.l, &beta, g.c, lc.l, g.c, lc.l,
                                    &result.algo, ws.defined() ? ws.data_ptr() : nullptr, ws_bytes, g.stream));
  return true;
}

// Runs g through cuBLAS (64-bit sizes): f64 (DGEMM), and the fallback when cuBLASLt has no algorithm.
void cublas_gemm(const Gemm& g, bool accumulate) {
  const MatmulPlan& p = *g.plan;
  const cudaDataType_t type = blas_type(g.dtype);
  if (bd::recording_library_call("cublasGemmStridedBatchedEx", g.stream)) return;
  cublasHandle_t handle = bd::cublas_handle(g.device, g.stream);  // sets the stream: workspace after
  Tensor ws = bd::try_workspace(g.device, bd::blas_workspace_bytes(g.device));
  BRISK_CUBLAS_CHECK(
      cublasSetWorkspace(handle, ws.defined() ? ws.data_ptr() : nullptr, ws.defined() ? ws.nbytes() : 0));
  const double alpha64 = 1.0, beta64 = accumulate ? 1.0 : 0.0;
  const float alpha32 = 1.0f, beta32 = accumulate ? 1.0f : 0.0f;
  const bool f64 = g.dtype == DType::F64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : (f32_uses_tf32(g.dtype) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  BRISK_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
      handle, op(p.b.trans), op(p.a.trans), p.m, p.n, p.k, alpha, g.b, type, p.b.ld, p.b.batch_stride, g.a, type,
      p.a.ld, p.a.batch_stride, beta, g.c, type, p.ldc, p.stride_c, p.batch_count, compute, CUBLAS_GEMM_DEFAULT));
}

// The plain product: cuBLASLt where it has an algorithm, else cuBLAS.
void plain_gemm(const Gemm& g, bool accumulate) {
  if (g.dtype != DType::F64 && g.plan->fits_int32 && lt_gemm(g, {}, accumulate)) return;
  cublas_gemm(g, accumulate);
}

// t as the plan needs it: a contiguous copy of its own shape, or expanded to the full batch.
Tensor prepare(const Tensor& t, OperandAction action, const Shape& batch) {
  switch (action) {
    case OperandAction::InPlace:
      return t;
    case OperandAction::Contiguous:
      return kernels::contiguous(t);
    case OperandAction::Expand: {
      const int64_t nd = t.dim(), nb = static_cast<int64_t>(batch.size());
      Shape sizes = batch;
      sizes.push_back(t.size(nd - 2));
      sizes.push_back(t.size(nd - 1));
      Strides st(static_cast<size_t>(nb), 0);
      for (int64_t d = 0; d < nd - 2; ++d)
        if (t.size(d) != 1) st[static_cast<size_t>(nb - (nd - 2) + d)] = t.stride(d);
      st.push_back(t.stride(nd - 2));
      st.push_back(t.stride(nd - 1));
      return kernels::contiguous(t.as_strided(sizes, st, t.offset()));
    }
  }
  return t;
}

// Plans a @ b, makes the copies the plan asks for (once) and returns the final plan.
MatmulPlan plan_and_prepare(Tensor& a, Tensor& b) {
  MatmulPlan p = plan_matmul(a.sizes(), a.strides(), b.sizes(), b.strides());
  if (p.in_place()) return p;
  a = prepare(a, p.a.action, p.batch);
  b = prepare(b, p.b.action, p.batch);
  p = plan_matmul(a.sizes(), a.strides(), b.sizes(), b.strides());
  BRISK_CHECK(p.in_place(), "matmul: internal error: copied operands ", a.sizes(), " and ", b.sizes(),
              " still cannot be read in place");
  return p;
}

// The bias as cuBLASLt's epilogue reads it, a packed vector: a fresh (aligned) buffer unless it is one.
Tensor packed_bias(const Tensor& bias) {
  if (bias.defined() && (bias.stride(0) != 1 || bd::pointer_alignment(bias.data_ptr()) < 16))
    return kernels::cast(bias, bias.dtype());
  return bias;
}

// Why cuBLASLt's GELU epilogues with an auxiliary matrix cannot serve an (m, n) = (features, rows)
// product over k in `dt` whose output and auxiliary matrix have leading dim m; nullptr when they can.
const char* gelu_aux_refusal(DType dt, int64_t m, int64_t n, int64_t k) {
  if (dt == DType::F64) return "f64 (cuBLASLt's epilogues serve f32, f16 and bf16)";
  // As linear's epilogues (and PyTorch): a matrix with one row or column is refused or mishandled.
  if (m <= 1 || n <= 1 || k <= 1) return "a product with a single row, column or summed dim";
  if (m % 8 != 0) return "features not a multiple of 8 (the auxiliary matrix's leading dim must be)";
  return nullptr;
}

Gemm make_gemm(const MatmulPlan& p, const Tensor& a, const Tensor& b, const Tensor& out) {
  Gemm g;
  g.plan = &p;
  g.dtype = out.dtype();
  g.a = a.data_ptr();
  g.b = b.data_ptr();
  g.c = out.data_ptr();
  g.device = out.device().index;
  g.stream = bd::current_native_stream(g.device);
  return g;
}

}  // namespace

void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  OpScope scope("matmul", &a_in, &b_in);
  if (out.numel() == 0) return;
  brisk::cuda::DeviceGuard guard(out.device().index);
  if (a_in.size(-1) == 0) {  // empty sums: zeros (what a GEMM with k = 0 and beta = 0 gives)
    fill_(out, 0.0);
    return;
  }
  Tensor a = a_in, b = b_in;
  const MatmulPlan p = plan_and_prepare(a, b);
  plain_gemm(make_gemm(p, a, b, out), false);
}

void linear(const Tensor& x_in, const Tensor& wt_in, const Tensor& bias_in, LinearEpilogue epilogue,
            const Tensor& out) {
  OpScope scope("linear", &x_in, &wt_in, &bias_in);
  if (out.numel() == 0) return;
  brisk::cuda::DeviceGuard guard(out.device().index);
  const bool gelu = epilogue == LinearEpilogue::GeluTanh;
  // The bias as a (1, out_f) row broadcast over out's rows, for the unfused path.
  auto preload_bias = [&] {
    if (bias_in.defined())
      copy_(out, bias_in.as_strided({out.size(0), out.size(1)}, {0, bias_in.stride(0)}, bias_in.offset()));
  };
  if (x_in.size(1) == 0) {  // no inputs: the bias (or zeros), then the epilogue
    if (bias_in.defined())
      preload_bias();
    else
      fill_(out, 0.0);
    if (gelu) detail::gelu_tanh_(out);
    return;
  }
  Tensor x = x_in, wt = wt_in;
  const MatmulPlan p = plan_and_prepare(x, wt);
  const Gemm g = make_gemm(p, x, wt, out);
  // cuBLASLt's epilogues: f32/f16/bf16, and (as PyTorch) only when no matrix has a single row or
  // column, for which cuBLASLt's heuristics reject or mishandle the bias epilogue.
  const bool fusable =
      (bias_in.defined() || gelu) && out.dtype() != DType::F64 && p.fits_int32 && p.m > 1 && p.n > 1 && p.k > 1;
  if (fusable) {
    const Tensor bias = packed_bias(bias_in);
    const cublasLtEpilogue_t e =
        bias.defined() ? (gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS) : CUBLASLT_EPILOGUE_GELU;
    if (lt_gemm(g, {.kind = e, .bias = bias.defined() ? bias.data_ptr() : nullptr}, false)) return;
  }
  preload_bias();
  plain_gemm(g, bias_in.defined());
  if (gelu) detail::gelu_tanh_(out);
}

const char* linear_gelu_aux(const Tensor& x_in, const Tensor& wt_in, const Tensor& bias_in, const Tensor& out,
                            const Tensor& pre) {
  OpScope scope("linear_gelu_aux", &x_in, &wt_in, &bias_in);
  brisk::cuda::DeviceGuard guard(out.device().index);
  if (const char* why = gelu_aux_refusal(out.dtype(), out.size(1), out.size(0), x_in.size(1))) return why;
  Tensor x = x_in, wt = wt_in;
  const MatmulPlan p = plan_and_prepare(x, wt);
  if (!p.fits_int32) return "a product too large for cuBLASLt's 32-bit sizes";
  const Tensor bias = packed_bias(bias_in);
  const LtEpilogue e{.kind = bias.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX,
                     .bias = bias.defined() ? bias.data_ptr() : nullptr,
                     .aux = pre.data_ptr(),
                     .aux_ld = p.ldc};
  if (!lt_gemm(make_gemm(p, x, wt, out), e, false)) return "cuBLASLt offers no algorithm with the GELU_AUX epilogue";
  return nullptr;
}

const char* matmul_dgelu(const Tensor& grad_in, const Tensor& w_in, const Tensor& pre, const Tensor& grad_pre,
                         const Tensor& grad_bias) {
  OpScope scope("matmul_dgelu", &grad_in, &w_in, &pre);
  brisk::cuda::DeviceGuard guard(grad_pre.device().index);
  const int64_t rows = grad_pre.size(0), features = grad_pre.size(1);
  if (const char* why = gelu_aux_refusal(grad_pre.dtype(), features, rows, grad_in.size(1))) return why;
  if (pre.dtype() != grad_pre.dtype()) return "the pre-activation's dtype differs from the gradient's";
  if (pre.stride(0) != features || pre.stride(1) != 1 || bd::pointer_alignment(pre.data_ptr()) < 16)
    return "the pre-activation is not a contiguous, 16-byte aligned matrix";
  const DgeluEpilogue mode = dgelu_epilogue();
  if (mode == DgeluEpilogue::Off) return "switched off (BRISK_CUDA_DGELU_EPILOGUE=off)";
  Tensor grad = grad_in, w = w_in;
  const MatmulPlan p = plan_and_prepare(grad, w);
  if (!p.fits_int32) return "a product too large for cuBLASLt's 32-bit sizes";
  const Gemm g = make_gemm(p, grad, w, grad_pre);
  const LtEpilogue bgrad{.kind = CUBLASLT_EPILOGUE_DGELU_BGRAD,
                         .bias = grad_bias.defined() ? grad_bias.data_ptr() : nullptr,
                         .aux = pre.data_ptr(),
                         .aux_ld = p.ldc};
  if (grad_bias.defined() && mode == DgeluEpilogue::Bgrad && lt_gemm(g, bgrad, false)) return nullptr;
  if (!lt_gemm(g, {.kind = CUBLASLT_EPILOGUE_DGELU, .aux = pre.data_ptr(), .aux_ld = p.ldc}, false))
    return "cuBLASLt offers no algorithm with the DGELU epilogue";
  if (grad_bias.defined()) {
    // DGELU_BGRAD refused or not asked for, DGELU accepted: the bias gradient as linear's backward computes it, a
    // ones-vector product (column sums without a transposed copy).
    Tensor ones = empty({1, rows}, grad_pre.dtype(), grad_pre.device());
    fill_(ones, 1.0);
    matmul(ones, grad_pre, grad_bias.as_strided({1, features}, {features, 1}, grad_bias.offset()));
  }
  return nullptr;
}

}  // namespace brisk::kernels::cuda
