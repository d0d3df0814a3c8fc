// GPU figures, each beside its reference measured in the same run on the same GPU:
//   copy        device-to-device copy bandwidth: cudaMemcpyAsync (the reference) and brisk's copy_
//   elementwise add, mul (fp32 and bf16) and GELU on 256 MiB tensors, as a fraction of the copy
//               bandwidth (bytes read + written / time)
//   rows        softmax and layer_norm over rows of 768, 4096 and 50304 (>= 256 MiB in total); at
//               50304, also each against its previous kernels (BRISK_CUDA_ROW_SPLIT_BARRIER=0,
//               BRISK_CUDA_LN_VECTOR_AFFINE=0) in alternating rounds; and layer norm's backward
//               with its weight sums at GPT-2 124M's shape (16,384 x 768, f32 and bf16, with and
//               without h's gradient as add_layer_norm has it): the one-pass kernel against the
//               split kernels (BRISK_CUDA_FUSED_LN_BACKWARD=0), alternating, GB/s of the bytes
//               either must move (grad, x, grad_h read once, dx written once)
//   matmul      brisk's matmul against cuBLASLt called directly (bf16; fp32 with TF32), n^3 for
//               n = 4096 and 8192: TFLOP/s and the ratio
//   attention   scaled_dot_product_attention at GPT-2 124M's shape (B 16, H 12, T 1024, D 64, bf16,
//               causal): brisk's fused kernels against the blocked path, and cuDNN's fused
//               attention against brisk's kernels (backward deterministic and not), forward alone
//               and forward + backward, TFLOP/s as flash-attention counts them (forward
//               4 B H T^2 D / 2 for causal, backward 2.5 times that); cuDNN's host cost per call
//   cnn         the example CNN's training step (batch 64, Adam, fp32 and bf16 autocast, data
//               already on the GPU, no host synchronisation inside the timed loop): images/s;
//               bench/gpu/torch_cnn.py runs the same network in PyTorch for the comparison;
//               and the host's cost per call of the second convolution's forward and backward
//               (enqueueing only; torch_cnn.py measures PyTorch's for the same shapes)
// Every timing is the median of 5 repeats, each timed with CUDA events over enough iterations to
// last --seconds. Prints a table, and JSON lines with --json FILE. Needs a CUDA build and a GPU.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <brisk/brisk.h>
#include <brisk/kernels/attention.h>
#include <brisk/kernels/conv.h>
#include <brisk/kernels/conv_plan.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/nn.h>
#include <brisk/kernels/settings.h>
#include <brisk/util/cli.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace brisk;

namespace {

double g_seconds = 0.3;
std::ofstream g_json;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

// Median seconds per call of fn (enqueued on the current stream), timed with events.
double time_per_call(const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  cuda::synchronize();
  // Calibrate: how many calls last g_seconds.
  cuda::Event a(true), b(true);
  a.record();
  fn();
  b.record();
  b.synchronize();
  const double one = std::max(1e-6, a.elapsed_ms(b) * 1e-3);
  const int iters = std::max(1, static_cast<int>(g_seconds / one));
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    a.record();
    for (int i = 0; i < iters; ++i) fn();
    b.record();
    b.synchronize();
    t.push_back(a.elapsed_ms(b) * 1e-3 / iters);
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

// Median seconds per call of a and of b, timed in alternating rounds (a, b, a, b, ...) so that
// clock changes of the GPU (boost, power and heat limits) fall on both alike.
std::pair<double, double> time_pair(const std::function<void()>& a, const std::function<void()>& b) {
  for (int i = 0; i < 3; ++i) {
    a();
    b();
  }
  cuda::synchronize();
  cuda::Event e0(true), e1(true);
  auto once = [&](const std::function<void()>& fn, int iters) {
    e0.record();
    for (int i = 0; i < iters; ++i) fn();
    e1.record();
    e1.synchronize();
    return e0.elapsed_ms(e1) * 1e-3 / iters;
  };
  const int ia = std::max(1, static_cast<int>(g_seconds / 5 / std::max(1e-6, once(a, 1))));
  const int ib = std::max(1, static_cast<int>(g_seconds / 5 / std::max(1e-6, once(b, 1))));
  std::vector<double> ta, tb;
  for (int r = 0; r < 7; ++r) {
    ta.push_back(once(a, ia));
    tb.push_back(once(b, ib));
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[3], tb[3]};
}

void emit(const std::string& group, const std::string& name, const std::string& unit, double value,
          const std::string& ref_name, double ref_value) {
  const double ratio = ref_value > 0 ? value / ref_value : 0;
  std::printf("%-12s %-34s %10.1f %-9s  ref %-22s %10.1f  ratio %.3f\n", group.c_str(), name.c_str(), value,
              unit.c_str(), ref_name.c_str(), ref_value, ratio);
  std::fflush(stdout);
  if (g_json.is_open()) {
    g_json << "{\"group\":\"" << group << "\",\"name\":\"" << name << "\",\"unit\":\"" << unit
           << "\",\"value\":" << value << ",\"reference\":\"" << ref_name << "\",\"reference_value\":" << ref_value
           << ",\"ratio\":" << ratio << "}\n";
    g_json.flush();
  }
}

constexpr int64_t kBytes = int64_t{256} << 20;

double copy_bandwidth() {
  Tensor src = randn({kBytes / 4}, {.device = cuda_device()});
  Tensor dst = empty_like(src);
  cudaStream_t s = static_cast<cudaStream_t>(cuda::current_stream().handle());
  const auto [t, t_ref] =
      time_pair([&] { dst.copy_(src); },
                [&] {
                  check_cuda(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), kBytes, cudaMemcpyDeviceToDevice, s),
                             "cudaMemcpyAsync");
                });
  const double ref = 2.0 * kBytes / t_ref / 1e9;
  emit("copy", "copy_ f32 256 MiB", "GB/s", 2.0 * kBytes / t / 1e9, "cudaMemcpyAsync D2D", ref);
  return ref;
}

void elementwise(double copy_gbs) {
  NoGradGuard ng;
  for (DType dt : {DType::F32, DType::BF16}) {
    const int64_t n = kBytes / static_cast<int64_t>(dtype_size(dt));
    Tensor a = randn({n}, {.dtype = dt, .device = cuda_device()});
    Tensor b = randn({n}, {.dtype = dt, .device = cuda_device()});
    const std::string d = dtype_name(dt);
    double t = time_per_call([&] { (void)add(a, b); });
    emit("elementwise", "add " + d + " 256 MiB", "GB/s", 3.0 * kBytes / t / 1e9, "copy bandwidth", copy_gbs);
    t = time_per_call([&] { (void)mul(a, b); });
    emit("elementwise", "mul " + d + " 256 MiB", "GB/s", 3.0 * kBytes / t / 1e9, "copy bandwidth", copy_gbs);
    t = time_per_call([&] { (void)gelu(a); });
    emit("elementwise", "gelu " + d + " 256 MiB", "GB/s", 2.0 * kBytes / t / 1e9, "copy bandwidth", copy_gbs);
  }
}

// Sets the row kernels' switches (each read at every call) for the calls that follow.
void row_switches(bool current) {
  const char* v = current ? "1" : "0";
  setenv("BRISK_CUDA_ROW_SPLIT_BARRIER", v, 1);
  setenv("BRISK_CUDA_LN_VECTOR_AFFINE", v, 1);
}

// layer_norm's backward with dx and the weight and bias sums (add: with grad_h, as
// add_layer_norm_backward), one pass against the split kernels, in alternating rounds.
void layer_norm_backward_pair(DType dt, bool add, double copy_gbs) {
  const int64_t R = 16 * 1024, D = 768;
  const TensorOptions o{.dtype = dt, .device = cuda_device()};
  const Tensor x = randn({R, D}, o), g = randn({R, D}, o), gh = randn({R, D}, o), w = randn({D}, o);
  const kernels::LayerNormResult f = kernels::layer_norm(x, {D}, w, Tensor(), 1e-5);
  auto call = [&](bool one_pass) {
    setenv("BRISK_CUDA_FUSED_LN_BACKWARD", one_pass ? "1" : "0", 1);
    if (add)
      (void)kernels::add_layer_norm_backward(g, gh, x, f.mean, f.rstd, w, {true, true, true});
    else
      (void)kernels::layer_norm_backward(g, x, f.mean, f.rstd, w, {true, true, true});
  };
  const auto [t_one, t_split] = time_pair([&] { call(true); }, [&] { call(false); });
  unsetenv("BRISK_CUDA_FUSED_LN_BACKWARD");
  const double bytes = static_cast<double>(R * D) * static_cast<double>(dtype_size(dt)) * (add ? 4 : 3);
  const std::string name = std::string(add ? "add_layer_norm" : "layer_norm") + " bwd " + dtype_name(dt) + " 16384x768";
  emit("rows", name + " 1-pass vs split", "GB/s", bytes / t_one / 1e9, "split kernels", bytes / t_split / 1e9);
  emit("rows", name + " 1-pass vs copy", "GB/s", bytes / t_one / 1e9, "copy bandwidth", copy_gbs);
  std::printf("%-12s %-34s %.1f us one pass, %.1f us split\n", "rows", name.c_str(), t_one * 1e6, t_split * 1e6);
}

void rows(double copy_gbs) {
  NoGradGuard ng;
  for (int64_t cols : {int64_t{768}, int64_t{4096}, int64_t{50304}}) {
    const int64_t r = (kBytes / 4 + cols - 1) / cols;
    const double bytes = 2.0 * static_cast<double>(r * cols) * 4;
    Tensor x = randn({r, cols}, {.device = cuda_device()});
    Tensor w = ones({cols}, {.device = cuda_device()}), b = zeros({cols}, {.device = cuda_device()});
    const std::string shape = std::to_string(r) + "x" + std::to_string(cols);
    double t = time_per_call([&] { (void)softmax(x, 1); });
    emit("rows", "softmax f32 " + shape, "GB/s", bytes / t / 1e9, "copy bandwidth", copy_gbs);
    t = time_per_call([&] { (void)layer_norm(x, {cols}, w, b); });
    emit("rows", "layer_norm f32 " + shape, "GB/s", bytes / t / 1e9, "copy bandwidth", copy_gbs);
    if (cols != 50304) continue;
    // The cluster kernels against their previous form, alternating (ratio > 1: the change pays).
    auto pair = [&](const char* what, const std::function<void()>& fn) {
      const auto [t_new, t_old] = time_pair(
          [&] {
            row_switches(true);
            fn();
          },
          [&] {
            row_switches(false);
            fn();
          });
      emit("rows", std::string(what) + " f32 " + shape + " now", "GB/s", bytes / t_new / 1e9, "previous kernels",
           bytes / t_old / 1e9);
    };
    pair("softmax", [&] { (void)softmax(x, 1); });
    pair("layer_norm", [&] { (void)layer_norm(x, {cols}, w, b); });
    row_switches(true);
  }
  for (DType dt : {DType::F32, DType::BF16})
    for (bool add : {false, true}) layer_norm_backward_pair(dt, add, copy_gbs);
}

// C = A B for row-major n x n matrices, through cuBLASLt directly: column-major C^T = B^T A^T, so
// cuBLAS's A is b and its B is a. The same workspace size as brisk's (32 MiB on Hopper).
// cuBLASLt called directly for C = A B (row-major n x n): column-major C^T = B^T A^T, so
// cuBLAS's A is b and its B is a; the heuristic's first choice with the same workspace size as
// brisk's (32 MiB on Hopper). fp32_partials: split-K sums restricted to fp32 (what brisk asks for
// 16-bit outputs when reduced-precision reductions are off).
class DirectLt {
 public:
  DirectLt(const Tensor& a, const Tensor& b, Tensor& c, bool tf32, bool fp32_partials = false) : a_(a), b_(b), c_(c) {
    const int64_t n = a.size(0);
    const cudaDataType_t type = a.dtype() == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
    check_lt(cublasLtCreate(&h_), "cublasLtCreate");
    check_lt(cublasLtMatmulDescCreate(&desc_, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
             "cublasLtMatmulDescCreate");
    check_lt(cublasLtMatrixLayoutCreate(&l_, type, n, n, n), "cublasLtMatrixLayoutCreate");
    ws_ = empty({static_cast<int64_t>(kWorkspace)}, DType::U8, cuda_device());
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                  sizeof(kWorkspace)),
             "preference");
    if (fp32_partials) {
      const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      check_lt(
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask)),
          "preference");
    }
    int found = 0;
    check_lt(cublasLtMatmulAlgoGetHeuristic(h_, desc_, l_, l_, l_, l_, pref, 1, &res_, &found), "heuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) throw std::runtime_error("cuBLASLt offers no algorithm");
  }
  ~DirectLt() {
    cublasLtMatrixLayoutDestroy(l_);
    cublasLtMatmulDescDestroy(desc_);
    cublasLtDestroy(h_);
  }
  DirectLt(const DirectLt&) = delete;
  DirectLt& operator=(const DirectLt&) = delete;
  void operator()() const {
    const float alpha = 1, beta = 0;
    cudaStream_t s = static_cast<cudaStream_t>(cuda::current_stream().handle());
    check_lt(cublasLtMatmul(h_, desc_, &alpha, b_.data_ptr(), l_, a_.data_ptr(), l_, &beta, c_.data_ptr(), l_,
                            c_.data_ptr(), l_, &res_.algo, ws_.data_ptr(), kWorkspace, s),
             "cublasLtMatmul");
  }

 private:
  static constexpr size_t kWorkspace = size_t{32} << 20;
  Tensor a_, b_, c_, ws_;
  cublasLtHandle_t h_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t l_ = nullptr;
  cublasLtMatmulHeuristicResult_t res_{};
};

void matmuls() {
  NoGradGuard ng;
  for (int64_t n : {int64_t{4096}, int64_t{8192}}) {
    for (DType dt : {DType::BF16, DType::F32}) {
      const bool tf32 = dt == DType::F32;
      cuda::set_matmul_allow_tf32(tf32);
      Tensor a = randn({n, n}, {.dtype = dt, .device = cuda_device()});
      Tensor b = randn({n, n}, {.dtype = dt, .device = cuda_device()});
      Tensor c = empty({n, n}, dt, cuda_device());
      const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      const DirectLt direct(a, b, c, tf32);
      direct();
      // brisk's result must equal cuBLASLt's (same library, same problem) to within rounding.
      Tensor mine = matmul(a, b);
      const double diff = max(abs(mine.to(DType::F32) - c.to(DType::F32))).item<double>();
      const double scale = max(abs(c.to(DType::F32))).item<double>();
      if (!(diff <= 1e-2 * scale)) {
        throw std::runtime_error("matmul " + std::to_string(n) + " " + dtype_name(dt) +
                                 ": brisk differs from cuBLASLt by " + std::to_string(diff));
      }
      const auto [t, t_ref] = time_pair([&] { (void)matmul(a, b); }, [&] { direct(); });
      const std::string name = "matmul " + std::string(tf32 ? "f32 (TF32) " : "bf16 ") + std::to_string(n) + "^3";
      emit("matmul", name, "TFLOP/s", flop / t / 1e12, "cuBLASLt direct", flop / t_ref / 1e12);
      // Where the time goes: the host's cost per call (enqueueing only) and cuBLASLt with the
      // split-K restriction brisk asks for on 16-bit outputs when reduced-precision reductions are off.
      cuda::synchronize();
      const auto h0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) (void)matmul(a, b);
      const double host_us = 1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() / 50;
      cuda::synchronize();
      double t_mask = t_ref;
      if (dt == DType::BF16) {
        const DirectLt masked(a, b, c, tf32, true);
        t_mask = time_pair([&] { masked(); }, [&] { direct(); }).first;
      }
      std::printf("%-12s %-34s host %.1f us/call, gpu %.1f us/call; cuBLASLt with fp32 split-K sums %.1f TFLOP/s\n",
                  "matmul", name.c_str(), host_us, 1e6 * t, flop / t_mask / 1e12);
    }
  }
  cuda::set_matmul_allow_tf32(false);
}

// Runs fn under one attention backend (kernels::AttentionBackend), then returns to the default.
void with_attention_backend(kernels::AttentionBackend b, const std::function<void()>& fn) {
  kernels::set_attention_backend(b);
  fn();
  kernels::set_attention_backend(std::nullopt);
}

// "cudnn", or what it fell back to and why (so a figure is never labelled with a backend that did
// not run it).
std::string cudnn_label() {
  const std::string why = kernels::attention_fallback_reason();
  return why.empty() ? "cudnn" : "cudnn FELL BACK (" + why + ")";
}

void attention() {
  using kernels::AttentionBackend;
  const int64_t B = 16, H = 12, T = 1024, D = 64;
  const DType dt = DType::BF16;
  Tensor q = randn({B, H, T, D}, {.dtype = dt, .device = cuda_device()});
  Tensor k = randn({B, H, T, D}, {.dtype = dt, .device = cuda_device()});
  Tensor v = randn({B, H, T, D}, {.dtype = dt, .device = cuda_device()});
  const Tensor gy = randn({B, H, T, D}, {.dtype = dt, .device = cuda_device()});
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_(true);
  const SdpaOptions causal{.is_causal = true};
  // Every backend must agree with the blocked path before it is timed.
  Tensor y[3];
  const AttentionBackend backends[3] = {AttentionBackend::Cudnn, AttentionBackend::Brisk, AttentionBackend::Math};
  std::string label = "cudnn";
  for (int i = 0; i < 3; ++i) {
    with_attention_backend(backends[i], [&] {
      y[i] = scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), causal);
      if (i == 0) label = cudnn_label();
    });
  }
  const double scale = max(abs(y[2].to(DType::F32))).item<double>();
  for (int i = 0; i < 2; ++i) {
    const double diff = max(abs(y[i].to(DType::F32) - y[2].to(DType::F32))).item<double>();
    if (!(diff <= 5e-2 * scale))
      throw std::runtime_error(std::string("attention: the ") + kernels::attention_backend_name(backends[i]) +
                               " output differs from the blocked one by " + std::to_string(diff));
  }
  const double fwd_flop =
      4.0 * static_cast<double>(B * H) * static_cast<double>(T) * static_cast<double>(T) * static_cast<double>(D) / 2.0;
  auto forward = [&](AttentionBackend b) {
    return [&, b] {
      with_attention_backend(b, [&] {
        NoGradGuard ng;
        (void)scaled_dot_product_attention(q, k, v, causal);
      });
    };
  };
  auto forward_backward = [&](AttentionBackend b) {
    return [&, b] {
      with_attention_backend(b, [&] {
        for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
        scaled_dot_product_attention(q, k, v, causal).backward(gy);
      });
    };
  };
  // brisk's kernels against the blocked path (the figures this group always had), then cuDNN
  // against brisk's kernels: deterministic (brisk's default) and not (PyTorch's default).
  const auto [tf, tf_ref] = time_pair(forward(AttentionBackend::Brisk), forward(AttentionBackend::Math));
  emit("attention", "gpt2 sdpa fwd bf16 fused", "TFLOP/s", fwd_flop / tf / 1e12, "blocked (score blocks)",
       fwd_flop / tf_ref / 1e12);
  const auto [tb, tb_ref] =
      time_pair(forward_backward(AttentionBackend::Brisk), forward_backward(AttentionBackend::Math));
  emit("attention", "gpt2 sdpa fwd+bwd bf16 fused", "TFLOP/s", 3.5 * fwd_flop / tb / 1e12, "blocked (score blocks)",
       3.5 * fwd_flop / tb_ref / 1e12);
  std::printf("%-12s %-34s brisk %.2f ms fwd, %.2f ms fwd+bwd; blocked %.2f ms, %.2f ms\n", "attention",
              "B16 H12 T1024 D64 causal", 1e3 * tf, 1e3 * tb, 1e3 * tf_ref, 1e3 * tb_ref);
  const double tc = time_pair(forward(AttentionBackend::Cudnn), forward(AttentionBackend::Brisk)).first;
  emit("attention", "gpt2 sdpa fwd bf16 " + label, "TFLOP/s", fwd_flop / tc / 1e12, "brisk kernels",
       fwd_flop / tf / 1e12);
  for (bool det : {true, false}) {
    kernels::DeterministicGuard guard(det);
    const auto [tcb, tbb] =
        time_pair(forward_backward(AttentionBackend::Cudnn), forward_backward(AttentionBackend::Brisk));
    with_attention_backend(AttentionBackend::Cudnn, [&] {
      for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
      scaled_dot_product_attention(q, k, v, causal).backward(gy);
      label = cudnn_label();
    });
    emit("attention", "gpt2 sdpa fwd+bwd bf16 " + label + (det ? " det" : " nondet"), "TFLOP/s",
         3.5 * fwd_flop / tcb / 1e12, "brisk kernels", 3.5 * fwd_flop / tbb / 1e12);
    std::printf("%-12s %-34s cudnn %.2f ms fwd, %.2f ms fwd+bwd; brisk %.2f ms fwd+bwd\n", "attention",
                det ? "deterministic" : "non-deterministic", 1e3 * tc, 1e3 * tcb, 1e3 * tbb);
  }
  // The host's cost per call of cuDNN's forward (plan lookup, variant pack, execute: enqueueing only).
  cuda::synchronize();
  const auto h0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) forward(AttentionBackend::Cudnn)();
  const double host_us = 1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() / 50;
  cuda::synchronize();
  const kernels::AttentionPlanStats stats = kernels::attention_plan_stats();
  std::printf("%-12s %-34s host %.1f us/call; cuDNN plans built %lld, reused %lld\n", "attention", "cudnn forward",
              host_us, static_cast<long long>(stats.built), static_cast<long long>(stats.reused));
}

// Host time per call of the example CNN's second convolution (x 64 x 16 x 14 x 14, 32 filters of
// 3 x 3, padding 1) at the kernel level: the forward with its bias, and the backward with the three
// gradients training asks for. Enqueueing only (the loop ends before the GPU is waited for; 100
// calls stay well within the launch queue); the median of 5 repeats.
void conv_host_per_call(bool bf16) {
  const DType dt = bf16 ? DType::BF16 : DType::F32;
  const TensorOptions o{.dtype = dt, .device = cuda_device()};
  const Tensor x = randn({64, 16, 14, 14}, o), w = randn({32, 16, 3, 3}, o), b = randn({32}, o);
  const Tensor gy = randn({64, 32, 14, 14}, o);
  const Conv2dOptions co{.padding = 1};
  auto host_us = [](const std::function<void()>& fn) {
    for (int i = 0; i < 10; ++i) fn();  // plans built, workspaces in the cache
    constexpr int kCalls = 100;
    std::vector<double> us;
    for (int r = 0; r < 5; ++r) {
      cuda::synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kCalls; ++i) fn();
      us.push_back(1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kCalls);
    }
    cuda::synchronize();
    std::sort(us.begin(), us.end());
    return us[2];
  };
  const double fwd = host_us([&] { (void)kernels::conv2d(x, w, b, co); });
  const double bwd = host_us([&] { (void)kernels::conv2d_backward(gy, x, w, co, true, true, true); });
  const std::string mode = bf16 ? "bf16" : "fp32";
  emit("cnn", "conv2 fwd host per call " + mode, "us", fwd, "-", 0);
  emit("cnn", "conv2 bwd host per call " + mode, "us", bwd, "-", 0);
  const kernels::ConvPlanStats stats = kernels::conv_plan_stats();
  std::printf("%-12s %-34s cuDNN plans built %lld, reused %lld\n", "cnn", "convolutions",
              static_cast<long long>(stats.built), static_cast<long long>(stats.reused));
}

void cnn(int64_t steps, const std::string& modes) {
  // As PyTorch runs by default with torch.backends.cudnn.benchmark = True: cuDNN's fastest
  // algorithms, not only its deterministic ones.
  kernels::set_deterministic(false);
  cuda::set_cudnn_benchmark(true);
  for (bool bf16 : {false, true}) {
    if (modes != "both" && modes != (bf16 ? "bf16" : "fp32")) continue;
    manual_seed(0);
    models::FashionCNN net;
    net.to(cuda_device());
    optim::Adam opt(net.parameters(), {.lr = 1e-3});
    const int64_t batch = 64;
    Tensor x = randn({batch, 1, 28, 28}, {.device = cuda_device()});
    Tensor y = randint(0, 10, {batch}, {.dtype = DType::I64, .device = cuda_device()});
    auto step = [&] {
      opt.zero_grad();
      Tensor loss;
      {
        amp::Autocast ac(DType::BF16, bf16);
        loss = cross_entropy(net(x), y);
      }
      loss.backward();
      opt.step();
    };
    for (int i = 0; i < 20; ++i) step();
    cuda::synchronize();
    profiler::reset();  // BRISK_PROFILE's table covers the timed steps only
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < steps; ++i) step();
    const auto t1 = std::chrono::steady_clock::now();  // host done enqueuing
    cuda::synchronize();
    const auto t2 = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(t2 - t0).count();
    const double host = std::chrono::duration<double>(t1 - t0).count();
    const std::string name = std::string("cnn train b64 ") + (bf16 ? "bf16 autocast" : "fp32");
    emit("cnn", name, "images/s", static_cast<double>(steps * batch) / s, "-", 0);
    std::printf("%-12s %-34s host enqueue %.1f us/step, wall %.1f us/step\n", "cnn", name.c_str(),
                1e6 * host / static_cast<double>(steps), 1e6 * s / static_cast<double>(steps));
    conv_host_per_call(bf16);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = "copy,elementwise,rows,matmul,attention,cnn", json;
  int64_t cnn_steps = 2000;
  std::string cnn_modes = "both";
  cli::Parser p("bench_gpu",
                "GPU speed beside its references in one run: copy bandwidth, elementwise/softmax/layer_norm as a\n"
                "fraction of it, matmul against cuBLASLt, fused against blocked attention, the example CNN's\n"
                "training images/s.");
  p.add("only", "comma-separated groups: copy, elementwise, rows, matmul, attention, cnn", &only);
  p.add("seconds", "time each figure over about this long (5 repeats, median)", &g_seconds);
  p.add("cnn_steps", "timed CNN training steps", &cnn_steps);
  p.add("cnn_modes", "fp32, bf16 or both", &cnn_modes);
  p.add("json", "also write one JSON line per figure to this file", &json);
  if (!p.parse(argc, argv)) return p.exit_code();
  try {
    if (!cuda::is_available()) {
      std::fprintf(stderr, "bench_gpu: no CUDA device (or this build has no CUDA support)\n");
      return 1;
    }
    if (!json.empty()) g_json.open(json);
    const auto props = cuda::device_properties(0);
    std::printf("bench_gpu on %s (sm_%d%d, %d SMs)\n", props.name.c_str(), props.major, props.minor,
                props.multiprocessors);
    auto want = [&](const char* g) { return ("," + only + ",").find(std::string(",") + g + ",") != std::string::npos; };
    double copy_gbs = 0;
    if (want("copy") || want("elementwise") || want("rows")) copy_gbs = copy_bandwidth();
    if (want("elementwise")) elementwise(copy_gbs);
    if (want("rows")) rows(copy_gbs);
    if (want("matmul")) matmuls();
    if (want("attention")) attention();
    if (want("cnn")) cnn(cnn_steps, cnn_modes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
