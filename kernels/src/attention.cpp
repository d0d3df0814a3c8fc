// Fused attention's public functions: argument checks, the layout the CUDA kernels read (last
// dim contiguous, other strides multiples of 8 elements, 16-byte aligned data; anything else is
// copied), output allocation. The kernels are in cuda/attention.cu.
#include "brisk/kernels/attention.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/settings.h"
#include "cuda/attention.h"
#include "cuda/cudnn_attention.h"

namespace brisk::kernels {

namespace {

constexpr int64_t kMaxTiles = 65535;  // grid.y of the kernels: tiles of 64 rows
constexpr int64_t kTileRows = 64;

bool head_dim_supported(int64_t d) {
  return d == 32 || d == 64 || d == 80 || d == 96 || d == 128;
}

// t itself when the kernels can read it in place, else a contiguous copy.
Tensor readable(const Tensor& t) {
  constexpr int64_t kVec = 8;  // elements per 16-byte load
  const bool ok = t.stride(3) == 1 && t.stride(0) % kVec == 0 && t.stride(1) % kVec == 0 && t.stride(2) % kVec == 0 &&
                  reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  return ok ? t : contiguous(t);
}

void require_supported(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  std::string why;
  BRISK_CHECK(fused_attention_supported(q, k, v, causal, &why), op, ": ", why);
}

}  // namespace

bool fused_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, std::string* why) {
  auto no = [&](const auto&... parts) {
    if (why) *why = ::brisk::detail::str_cat(parts...);
    return false;
  };
  if (!q.defined() || !k.defined() || !v.defined()) return no("undefined input");
  if (!q.device().is_cuda()) return no("inputs on ", q.device().str(), ", not a CUDA device");
  if (k.device() != q.device() || v.device() != q.device()) return no("q, k and v are on different devices");
  if (q.dtype() != DType::F32 && q.dtype() != DType::F16 && q.dtype() != DType::BF16)
    return no("dtype ", dtype_name(q.dtype()), " (f32, f16 and bf16 only)");
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) return no("q, k and v have different dtypes");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    return no("shapes ", q.sizes(), ", ", k.sizes(), ", ", v.sizes(), " (4 dims (B, H, T, D) needed)");
  const int64_t d = q.size(3);
  if (!head_dim_supported(d)) return no("head dim ", d, " (32, 64, 80, 96 or 128 supported)");
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || k.size(1) != q.size(1) || v.size(1) != q.size(1) ||
      k.size(3) != d || v.size(3) != d || v.size(2) != k.size(2))
    return no("shapes ", q.sizes(), ", ", k.sizes(), ", ", v.sizes(), " do not match as (B, H, Tq, D), (B, H, Tk, D)");
  const int64_t tq = q.size(2), tk = k.size(2);
  if (tq < 1 || tk < 1 || q.size(0) < 1 || q.size(1) < 1) return no("empty inputs ", q.sizes(), ", ", k.sizes());
  if (is_causal && tq != tk) return no("causal with ", tq, " queries and ", tk, " keys");
  if ((tq + kTileRows - 1) / kTileRows > kMaxTiles || (tk + kTileRows - 1) / kTileRows > kMaxTiles)
    return no("sequence too long (", tq, ", ", tk, ")");
  if (q.size(0) * q.size(1) > 0x7fffffff) return no("B * H = ", q.size(0) * q.size(1), " too large");
  return true;
}

namespace {

// The process-wide setting: -1 when unset (the environment decides), else an AttentionBackend.
std::atomic<int> g_backend{-1};

// Why the calling thread's last fused attention call did not run on cuDNN ("" when it did).
thread_local std::string t_fallback;

bool env_says_off(const char* name) {
  const char* env = std::getenv(name);
  if (!env) return false;
  for (const char* off : {"0", "false", "off", "no", "FALSE", "OFF", "NO", "False", "Off", "No"})
    if (std::strcmp(env, off) == 0) return true;
  return false;
}

// Output strides cuDNN writes through (what readable() guarantees for the inputs).
bool cudnn_writable(const Tensor& t) {
  constexpr int64_t kVec = 8;
  return t.stride(3) == 1 && t.stride(0) % kVec == 0 && t.stride(1) % kVec == 0 && t.stride(2) % kVec == 0 &&
         reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

}  // namespace

const char* attention_backend_name(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::Cudnn:
      return "cudnn";
    case AttentionBackend::Brisk:
      return "brisk";
    case AttentionBackend::Math:
      return "math";
  }
  return "?";
}

AttentionBackend parse_attention_backend(const std::string& name, const char* what) {
  for (AttentionBackend b : {AttentionBackend::Cudnn, AttentionBackend::Brisk, AttentionBackend::Math})
    if (name == attention_backend_name(b)) return b;
  BRISK_THROW(what, ": unknown attention backend '", name,
              "'; valid values are cudnn (cuDNN's fused attention, the default), brisk (brisk's fused kernels) "
              "and math (no fused kernel)");
}

AttentionBackend attention_backend() {
  if (const int set = g_backend.load(std::memory_order_relaxed); set >= 0) return static_cast<AttentionBackend>(set);
  if (const char* env = std::getenv("BRISK_CUDA_ATTENTION"); env && *env)
    return parse_attention_backend(env, "BRISK_CUDA_ATTENTION");
  return env_says_off("BRISK_CUDA_FUSED_ATTENTION") ? AttentionBackend::Math : AttentionBackend::Cudnn;
}

void set_attention_backend(std::optional<AttentionBackend> b) {
  g_backend.store(b ? static_cast<int>(*b) : -1, std::memory_order_relaxed);
}

bool fused_attention_enabled() {
  return attention_backend() != AttentionBackend::Math;
}

bool cudnn_attention_supported(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, std::string* why) {
  auto no = [&](const auto&... parts) {
    if (why) *why = ::brisk::detail::str_cat(parts...);
    return false;
  };
  std::string base;
  if (!fused_attention_supported(q, k, v, is_causal, &base)) return no(base);
  if (q.dtype() != DType::F16 && q.dtype() != DType::BF16)
    return no("dtype ", dtype_name(q.dtype()), " (cuDNN's fused attention takes f16 and bf16)");
  if (q.size(3) % 8 != 0 || q.size(3) > 128)
    return no("head dim ", q.size(3), " (cuDNN's fused attention takes multiples of 8 up to 128)");
  if (std::string device_why = cuda::cudnn_attention_device_unsupported(q.device().index); !device_why.empty())
    return no(device_why);
  return true;
}

std::string attention_fallback_reason() {
  return t_fallback;
}

AttentionPlanStats attention_plan_stats() {
#if defined(BRISK_WITH_CUDA)
  return cuda::cudnn_attention_stats();
#else
  return {};
#endif
}

void clear_attention_plans() {
#if defined(BRISK_WITH_CUDA)
  cuda::cudnn_attention_reset_cache();
#endif
}

namespace {

// A (B, H, T, D) output in (B, T, H, D) memory, as PyTorch's flash attention returns it: the
// output's transpose(1, 2) is then a contiguous (B, T, H * D) for the projection after it, and the
// gradients of q, k and v (head views of (B, T, C) projections) reach those projections without
// a copy.
Tensor empty_bthd(const Tensor& like) {
  const int64_t B = like.size(0), H = like.size(1), T = like.size(2), D = like.size(3);
  const Tensor buf = empty({B, T, H, D}, like.dtype(), like.device());
  return buf.as_strided({B, H, T, D}, {T * H * D, D, H * D, 1}, buf.offset());
}

}  // namespace

AttentionForwardResult attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool is_causal,
                                         double scale) {
  require_supported("attention_forward", q_in, k_in, v_in, is_causal);
  const Tensor q = readable(q_in), k = readable(k_in), v = readable(v_in);
  AttentionForwardResult r{empty_bthd(q), empty({q.size(0), q.size(1), q.size(2)}, DType::F32, q.device())};
  t_fallback.clear();
  if (attention_backend() == AttentionBackend::Cudnn && cudnn_attention_supported(q, k, v, is_causal, &t_fallback) &&
      cuda::cudnn_attention_forward(q, k, v, is_causal, scale, r.out, r.lse, &t_fallback))
    return r;
  cuda::attention_forward(q, k, v, is_causal, scale, r.out, r.lse);
  return r;
}

namespace {

// The backward through cuDNN when the backend, the inputs, the outputs' layout and the
// determinism setting allow; false (t_fallback saying why) when brisk's kernels must run it.
bool cudnn_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                    const Tensor& lse, bool is_causal, double scale, const AttentionGrads& r) {
  t_fallback.clear();
  if (attention_backend() != AttentionBackend::Cudnn || !cudnn_attention_supported(q, k, v, is_causal, &t_fallback))
    return false;
  for (const Tensor* d : {&r.dq, &r.dk, &r.dv}) {
    if (!cudnn_writable(*d)) {
      t_fallback =
          ::brisk::detail::str_cat("a gradient output with strides ", d->strides(),
                                   " (cuDNN writes strides that are multiples of 8 to 16-byte aligned memory)");
      return false;
    }
  }
  if (deterministic() && !cuda::cudnn_attention_backward_deterministic(q.device().index)) {
    t_fallback = ::brisk::detail::str_cat("cuDNN has no deterministic attention backward on ", q.device().str(),
                                          " (compute capability 9.x has one); brisk's deterministic kernels run it "
                                          "(kernels::set_deterministic(false) allows cuDNN's)");
    return false;
  }
  return cuda::cudnn_attention_backward(grad, q, k, v, out, lse, is_causal, scale, r.dq, r.dk, r.dv, &t_fallback);
}

}  // namespace

AttentionGrads attention_backward(const Tensor& grad_in, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                  const Tensor& out_in, const Tensor& lse, bool is_causal, double scale,
                                  const AttentionGrads* into) {
  require_supported("attention_backward", q_in, k_in, v_in, is_causal);
  BRISK_CHECK(grad_in.sizes() == q_in.sizes() && grad_in.dtype() == q_in.dtype() && out_in.sizes() == q_in.sizes() &&
                  out_in.dtype() == q_in.dtype(),
              "attention_backward: grad ", grad_in.sizes(), " ", dtype_name(grad_in.dtype()), " and out ",
              out_in.sizes(), " ", dtype_name(out_in.dtype()), " must match q ", q_in.sizes(), " ",
              dtype_name(q_in.dtype()));
  BRISK_CHECK(lse.dtype() == DType::F32 && lse.sizes() == Shape({q_in.size(0), q_in.size(1), q_in.size(2)}),
              "attention_backward: lse must be f32 ", Shape({q_in.size(0), q_in.size(1), q_in.size(2)}), ", got ",
              lse.sizes(), " ", dtype_name(lse.dtype()));
  check_same_device("attention_backward", grad_in, q_in);
  check_same_device("attention_backward", out_in, q_in);
  check_same_device("attention_backward", lse, q_in);
  const Tensor q = readable(q_in), k = readable(k_in), v = readable(v_in);
  const Tensor grad = readable(grad_in), out = readable(out_in);
  const Tensor l = lse.is_contiguous() ? lse : contiguous(lse);
  AttentionGrads r;
  if (into) {
    const std::pair<const Tensor*, const Tensor*> pairs[] = {
        {&into->dq, &q_in}, {&into->dk, &k_in}, {&into->dv, &v_in}};
    for (const auto& [d, x] : pairs) {
      BRISK_CHECK(d->defined() && d->sizes() == x->sizes() && d->dtype() == x->dtype() && d->device() == x->device() &&
                      d->stride(3) == 1 && d->stride(0) % 2 == 0 && d->stride(1) % 2 == 0 && d->stride(2) % 2 == 0 &&
                      reinterpret_cast<uintptr_t>(d->data_ptr()) % 4 == 0,
                  "attention_backward: each output must have its input's shape ", x->sizes(), ", dtype ",
                  dtype_name(x->dtype()), " and device, a contiguous last dim and even strides, got ",
                  d->defined() ? d->sizes() : Shape{}, " with strides ", d->defined() ? d->strides() : Strides{});
    }
    r = *into;
  } else {
    r = {empty_bthd(q), empty_bthd(k), empty_bthd(v)};
  }
  if (cudnn_backward(grad, q, k, v, out, l, is_causal, scale, r)) return r;
  const Tensor delta = empty({q.size(0), q.size(1), q.size(2)}, DType::F32, q.device());
  cuda::attention_backward(grad, q, k, v, out, l, is_causal, scale, r.dq, r.dk, r.dv, delta);
  return r;
}

}  // namespace brisk::kernels
