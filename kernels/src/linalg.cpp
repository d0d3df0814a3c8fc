// Public matmul and linear: shape rules (1-D promotion, batch broadcasting), layout choice
// (row-major or transposed operands go to the GEMM in place, others are copied once), dtype
// dispatch (f16/bf16 through f32 on the CPU) and the device switch.
#include "brisk/kernels/linalg.h"

#include <cstdlib>
#include <optional>

#include "brisk/core/profiler.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "cpu/linalg_kernels.h"
#include "cuda/matmul.h"

namespace brisk::kernels {

namespace {

bool is_half(DType dt) {
  return dt == DType::F16 || dt == DType::BF16;
}

// How gemm() can read a (rows, cols) matrix with row stride rs and column stride cs in place:
// row-major (trans = false) or as the transpose of a row-major (cols, rows) matrix.
struct GemmLayout {
  bool trans = false;
  int64_t ld = 1;
};
std::optional<GemmLayout> gemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cols == 1 || cs == 1) {
    int64_t ld = rows == 1 ? cols : rs;
    if (ld >= std::max<int64_t>(cols, 1)) return GemmLayout{false, ld};
  }
  if (rows == 1 || rs == 1) {
    int64_t ld = cols == 1 ? rows : cs;
    if (ld >= std::max<int64_t>(rows, 1)) return GemmLayout{true, ld};
  }
  return std::nullopt;
}

// A view of the last two dims' layout of t (sizes/strides of its matrix).
std::optional<GemmLayout> matrix_layout(const Tensor& t) {
  const int64_t n = t.dim();
  return gemm_layout(t.size(n - 2), t.size(n - 1), t.stride(n - 2), t.stride(n - 1));
}

// Element offsets of each matrix of t over the broadcast batch shape `batch`.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int64_t nb = static_cast<int64_t>(batch.size()), tb = t.dim() - 2;
  Strides st(static_cast<size_t>(nb), 0);
  for (int64_t d = 0; d < tb; ++d)
    if (t.size(d) != 1) st[nb - tb + d] = t.stride(d);
  const int64_t count = shape_numel(batch);
  std::vector<int64_t> off(static_cast<size_t>(count));
  std::vector<int64_t> idx(static_cast<size_t>(nb), 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < count; ++i) {
    off[i] = cur;
    for (int64_t d = nb - 1; d >= 0; --d) {
      cur += st[d];
      if (++idx[d] < batch[d]) break;
      cur -= st[d] * batch[d];
      idx[d] = 0;
    }
  }
  return off;
}

// The single row stride of t's (batch..., M) dims when they are one uniformly strided run of
// rows (so the whole batch is one (batch*M, K) matrix), else nullopt.
std::optional<int64_t> folded_row_stride(const Tensor& t) {
  std::optional<int64_t> stride;
  int64_t extent = 1;  // rows covered so far, innermost first
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (!stride)
      stride = t.stride(d);
    else if (t.stride(d) != *stride * extent)
      return std::nullopt;
    extent *= t.size(d);
  }
  return stride ? stride : std::optional<int64_t>(t.size(-1));
}

// One product and a batch of them, for each operand type: f32 and f64 into their own type, bf16
// (the dot-product kernel, cpu/gemm_bf16.cpp) into f32.
void gemm_to(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
             int64_t ldb, float* c) {
  gemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N);
}
void gemm_to(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* a, int64_t lda, const double* b,
             int64_t ldb, double* c) {
  gemm(ta, tb, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, N);
}
void gemm_to(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t lda, const BFloat16* b,
             int64_t ldb, float* c) {
  cpu::gemm_bf16(ta, tb, M, N, K, cpu::bits_of(a), lda, cpu::bits_of(b), ldb, 0.0f, c, N);
}
template <class T, class Out>
void bmm_to(int64_t batch, int64_t M, int64_t N, int64_t K, const T* a, const int64_t* ao, bool ta, int64_t lda,
            const T* b, const int64_t* bo, bool tb, int64_t ldb, Out* c) {
  if constexpr (std::is_same_v<T, BFloat16>)
    cpu::bmm_bf16(batch, M, N, K, cpu::bits_of(a), ao, ta, lda, cpu::bits_of(b), bo, tb, ldb, c);
  else
    cpu::bmm(batch, M, N, K, a, ao, ta, lda, b, bo, tb, ldb, c);
}

// out (batch..., M, N) contiguous = a (.., M, K) @ b (.., K, N), batch dims already broadcast-checked;
// T is the operands' type, Out the result's (f32 for bf16 operands).
template <class T, class Out = T>
void matmul_into(Tensor a, Tensor b, const Shape& batch, const Tensor& out) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  auto la = matrix_layout(a);
  if (!la) {
    a = contiguous(a);
    la = matrix_layout(a);
  }
  auto lb = matrix_layout(b);
  if (!lb) {
    b = contiguous(b);
    lb = matrix_layout(b);
  }
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  Out* pc = static_cast<Out*>(out.data_ptr());
  bool b_shared = true;  // b is one matrix for the whole batch
  for (int64_t d = 0; d + 2 < b.dim(); ++d) b_shared &= b.size(d) == 1 || b.stride(d) == 0;
  if (b_shared && !la->trans && a.dim() > 2) {
    // x @ W with x's rows evenly spaced: one big GEMM over every row of the batch.
    if (auto rs = folded_row_stride(a); rs && *rs >= std::max<int64_t>(K, 1)) {
      int64_t rows = M;
      for (int64_t d = 0; d + 2 < a.dim(); ++d) rows *= a.size(d);
      if (rows == shape_numel(batch) * M) {
        gemm_to(false, lb->trans, rows, N, K, pa, *rs, pb, lb->ld, pc);
        return;
      }
    }
  }
  std::vector<int64_t> ao = batch_offsets(a, batch), bo = batch_offsets(b, batch);
  bmm_to(static_cast<int64_t>(ao.size()), M, N, K, pa, ao.data(), la->trans, la->ld, pb, bo.data(), lb->trans, lb->ld,
         pc);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  BRISK_CHECK(a.defined() && b.defined(), "matmul: undefined tensor argument");
  BRISK_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got shapes ", a.sizes(),
              " and ", b.sizes());
  check_same_device("matmul", a, b);
  BRISK_CHECK(a.dtype() == b.dtype(), "matmul: dtype mismatch: ", dtype_name(a.dtype()), " ", a.sizes(), " vs ",
              dtype_name(b.dtype()), " ", b.sizes());
  check_float("matmul", a);
  // Promote 1-D operands to matrices (views, no copy).
  Tensor a2 = a.dim() == 1 ? a.as_strided({1, a.size(0)}, {0, a.stride(0)}, a.offset()) : a;
  Tensor b2 = b.dim() == 1 ? b.as_strided({b.size(0), 1}, {b.stride(0), 0}, b.offset()) : b;
  const int64_t M = a2.size(-2), K = a2.size(-1), N = b2.size(-1);
  BRISK_CHECK(K == b2.size(-2), "matmul: inner sizes differ: a ", a.sizes(), " has ", K, " columns but b ", b.sizes(),
              " has ", b2.size(-2), " rows");
  Shape ab(a2.sizes().begin(), a2.sizes().end() - 2), bb(b2.sizes().begin(), b2.sizes().end() - 2);
  Shape batch;
  {
    const size_t nd = std::max(ab.size(), bb.size());
    batch.resize(nd);
    for (size_t i = 0; i < nd; ++i) {
      int64_t x = i < nd - ab.size() ? 1 : ab[i - (nd - ab.size())];
      int64_t y = i < nd - bb.size() ? 1 : bb[i - (nd - bb.size())];
      BRISK_CHECK(x == y || x == 1 || y == 1, "matmul: batch dims ", ab, " of a ", a.sizes(), " and ", bb, " of b ",
                  b.sizes(), " cannot be broadcast");
      batch[i] = x == 1 ? y : x;
    }
  }
  Shape full = batch;
  full.push_back(M);
  full.push_back(N);
  Shape result = batch;
  if (a.dim() > 1) result.push_back(M);
  if (b.dim() > 1) result.push_back(N);

  const DType dt = a.dtype();
  if (a.device().is_cuda()) {
    Tensor out = empty(full, dt, a.device());
    cuda::matmul(a2, b2, out);
    return out.as_strided(result, contiguous_strides(result), out.offset());
  }
  const DType cdt = is_half(dt) ? DType::F32 : dt;
  profiler::Scope prof_scope(batch.empty() ? "mm" : "bmm");
  Tensor out = empty(full, cdt, a.device());
  if (dt == DType::BF16 && cpu_bf16_dot()) {
    matmul_into<BFloat16, float>(a2, b2, batch, out);
    const Tensor r = cast(out, dt);
    return r.as_strided(result, contiguous_strides(result), r.offset());
  }
  if (cdt != dt) {
    a2 = cast(a2, cdt);
    b2 = cast(b2, cdt);
  }
  if (cdt == DType::F64)
    matmul_into<double>(a2, b2, batch, out);
  else
    matmul_into<float>(a2, b2, batch, out);
  if (cdt != dt) out = cast(out, dt);
  return out.as_strided(result, contiguous_strides(result), out.offset());
}

namespace {

void check_linear_args(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  BRISK_CHECK(x.defined() && weight.defined(), "linear: undefined input or weight");
  BRISK_CHECK(x.dim() >= 1, "linear: input must have at least 1 dim, got a scalar");
  BRISK_CHECK(weight.dim() == 2, "linear: weight must be 2-D (out_features, in_features), got ", weight.sizes());
  BRISK_CHECK(x.size(-1) == weight.size(1), "linear: input ", x.sizes(), " has ", x.size(-1), " features but weight ",
              weight.sizes(), " expects ", weight.size(1));
  check_same_device("linear", x, weight);
  BRISK_CHECK(x.dtype() == weight.dtype(), "linear: dtype mismatch: input ", dtype_name(x.dtype()), " vs weight ",
              dtype_name(weight.dtype()));
  check_float("linear", x);
  if (bias.defined()) {
    BRISK_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias ", bias.sizes(),
                " does not match weight ", weight.sizes(), " (expected [", weight.size(0), "])");
    check_same_device("linear", x, bias);
    BRISK_CHECK(bias.dtype() == x.dtype(), "linear: dtype mismatch: input ", dtype_name(x.dtype()), " vs bias ",
                dtype_name(bias.dtype()));
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, LinearEpilogue epilogue) {
  check_linear_args(x, weight, bias);
  BRISK_CHECK(epilogue == LinearEpilogue::None || epilogue == LinearEpilogue::GeluTanh, "linear: unknown epilogue ",
              static_cast<int>(epilogue));
  const DType dt = x.dtype();
  const bool bf16_dot = dt == DType::BF16 && x.device().is_cpu() && cpu_bf16_dot();
  if (is_half(dt) && x.device().is_cpu() && !bf16_dot) {
    // The epilogue runs in f32 too, before the single rounding to 16 bits (as on the GPU).
    Tensor y = linear(cast(x, DType::F32), cast(weight, DType::F32), bias.defined() ? cast(bias, DType::F32) : Tensor(),
                      epilogue);
    return cast(y, dt);
  }
  const int64_t in = weight.size(1), outf = weight.size(0);
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  const int64_t rows = shape_numel(out_shape);
  out_shape.push_back(outf);
  // bf16 products with the dot-product kernel accumulate into f32 and round once, after the epilogue.
  Tensor out = empty(out_shape, bf16_dot ? DType::F32 : dt, x.device());
  if (out.numel() == 0) return bf16_dot ? cast(out, dt) : out;
  if (in == 0 && x.device().is_cpu()) {  // empty sums: the bias (or zeros), then the epilogue
    if (bias.defined())
      copy_(out, bias);
    else
      fill_(out, 0.0);
    if (epilogue == LinearEpilogue::GeluTanh) out = unary(UnaryOp::GeluTanh, out);
    return bf16_dot ? cast(out, dt) : out;
  }
  // x as (rows, in) without copying when its leading dims allow it.
  Tensor x2;
  Strides st;
  if (compute_view_strides(x.sizes(), x.strides(), {rows, in}, st)) x2 = x.as_strided({rows, in}, st, x.offset());
  auto lx = x2.defined() ? gemm_layout(rows, in, st[0], st[1]) : std::nullopt;
  if (!lx) {
    Tensor xc = contiguous(x);
    x2 = xc.as_strided({rows, in}, {in, 1}, xc.offset());
    lx = gemm_layout(rows, in, in, 1);
  }
  if (x.device().is_cuda()) {
    // W^T as an (in, out) view: the plan reads a row-major W transposed, in place.
    const Tensor wt = weight.as_strided({in, outf}, {weight.stride(1), weight.stride(0)}, weight.offset());
    cuda::linear(x2, wt, bias, epilogue, out.as_strided({rows, outf}, {outf, 1}, out.offset()));
    return out;
  }
  // op(B) = W^T, (in, out): W row-major (out, in) is read transposed.
  auto lw = gemm_layout(in, outf, weight.stride(1), weight.stride(0));
  Tensor w = weight;
  if (!lw) {
    w = contiguous(weight);
    lw = gemm_layout(in, outf, 1, in);
  }
  // The profiler sees PyTorch's split: linear > addmm (mm without a bias) > copy_ of the bias.
  profiler::Scope prof_gemm(bias.defined() ? "addmm" : "mm");
  double beta = 0.0;
  if (bias.defined()) {
    profiler::Scope prof_copy("copy_");
    copy_(out, bias);  // broadcast bias into every row, then accumulate the product onto it
    beta = 1.0;
  }
  visit_float(dt, x.device(), "linear", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      gemm(lx->trans, lw->trans, rows, outf, in, T(1), static_cast<const T*>(x2.data_ptr()), lx->ld,
           static_cast<const T*>(w.data_ptr()), lw->ld, T(beta), static_cast<T*>(out.data_ptr()), outf);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      cpu::gemm_bf16(lx->trans, lw->trans, rows, outf, in, static_cast<const uint16_t*>(x2.data_ptr()), lx->ld,
                     static_cast<const uint16_t*>(w.data_ptr()), lw->ld, static_cast<float>(beta),
                     static_cast<float*>(out.data_ptr()), outf);
    }
  });
  if (epilogue == LinearEpilogue::GeluTanh) out = unary(UnaryOp::GeluTanh, out);
  return bf16_dot ? cast(out, dt) : out;
}

namespace {

// Why the calling thread's last GELU MLP product on the GPU ran unfused ("" when it did not).
thread_local std::string tl_gelu_fallback;

}  // namespace

LinearGeluAux linear_gelu_aux(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_linear_args(x, weight, bias);
  tl_gelu_fallback.clear();
  if (x.device().is_cuda()) {
    const int64_t in = weight.size(1), outf = weight.size(0);
    Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
    const int64_t rows = shape_numel(out_shape);
    out_shape.push_back(outf);
    LinearGeluAux r{empty(out_shape, x.dtype(), x.device()), empty(out_shape, x.dtype(), x.device())};
    if (r.out.numel() == 0) return r;
    const Tensor wt = weight.as_strided({in, outf}, {weight.stride(1), weight.stride(0)}, weight.offset());
    const char* why = cuda::linear_gelu_aux(reshaped(x, {rows, in}), wt, bias, reshaped(r.out, {rows, outf}),
                                            reshaped(r.pre, {rows, outf}));
    if (why == nullptr) return r;
    tl_gelu_fallback = why;
  }
  // Unfused: the ops (and so the bits) of gelu(linear(x, weight, bias)).
  Tensor pre = linear(x, weight, bias);
  return {unary(UnaryOp::GeluTanh, pre), pre};
}

MatmulDgelu matmul_dgelu(const Tensor& grad, const Tensor& weight, const Tensor& pre, bool bias_grad) {
  BRISK_CHECK(grad.defined() && weight.defined() && pre.defined(), "matmul_dgelu: undefined grad, weight or pre");
  BRISK_CHECK(
      weight.dim() == 2 && grad.dim() >= 1 && grad.size(-1) == weight.size(0) && pre.dim() >= 1 &&
          pre.size(-1) == weight.size(1) &&
          pre.numel() / std::max<int64_t>(weight.size(1), 1) == grad.numel() / std::max<int64_t>(weight.size(0), 1),
      "matmul_dgelu: grad ", grad.sizes(), ", weight ", weight.sizes(), " and pre ", pre.sizes(),
      " do not fit grad (..., out) @ weight (out, in) = pre (..., in)");
  BRISK_CHECK(grad.dtype() == weight.dtype() && pre.dtype() == grad.dtype(), "matmul_dgelu: dtype mismatch: grad ",
              dtype_name(grad.dtype()), ", weight ", dtype_name(weight.dtype()), ", pre ", dtype_name(pre.dtype()));
  check_same_device("matmul_dgelu", grad, weight);
  check_same_device("matmul_dgelu", grad, pre);
  check_float("matmul_dgelu", grad);
  tl_gelu_fallback.clear();
  const int64_t in = weight.size(1), outf = weight.size(0), rows = pre.numel() / std::max<int64_t>(in, 1);
  if (grad.device().is_cuda() && pre.numel() > 0) {
    MatmulDgelu r{empty(pre.sizes(), pre.dtype(), pre.device()), Tensor()};
    if (bias_grad) r.grad_bias = empty({in}, pre.dtype(), pre.device());
    const char* why = cuda::matmul_dgelu(reshaped(grad, {rows, outf}), weight, reshaped(pre, {rows, in}),
                                         reshaped(r.grad_pre, {rows, in}), r.grad_bias);
    if (why == nullptr) return r;
    tl_gelu_fallback = why;
  }
  // Unfused: linear's input gradient, GELU's backward, linear's bias gradient (autograd's ops).
  const Tensor dh = matmul(reshaped(grad, {rows, outf}), weight);
  MatmulDgelu r{unary_backward(UnaryOp::GeluTanh, dh, reshaped(pre, {rows, in}), Tensor()), Tensor()};
  if (bias_grad) r.grad_bias = matmul(full({rows}, 1.0, {r.grad_pre.dtype(), r.grad_pre.device()}), r.grad_pre);
  r.grad_pre = reshaped(r.grad_pre, pre.sizes());
  return r;
}

DgeluEpilogue dgelu_epilogue() {
  const char* env = std::getenv("BRISK_CUDA_DGELU_EPILOGUE");
  if (env == nullptr || *env == 0) return DgeluEpilogue::Dgelu;
  return parse_enum<DgeluEpilogue>(env, "BRISK_CUDA_DGELU_EPILOGUE");
}

std::string gelu_epilogue_fallback_reason() {
  return tl_gelu_fallback;
}

}  // namespace brisk::kernels
