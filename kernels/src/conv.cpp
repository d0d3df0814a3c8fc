// Public conv2d and pooling kernels: argument checks (errors name the op and shapes), output
// allocation, device switch; f16/bf16 convolutions compute in f32 (on the GPU: cuDNN with f32
// accumulation).
#include "brisk/kernels/conv.h"

#include <atomic>

#include "brisk/kernels/conv_plan.h"

#include "as_dtype.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "cpu/conv_cpu.h"
#include "cuda/conv.h"

namespace brisk::cuda {

// The cuDNN benchmark setting lives with the convolutions that read it (cuda.h declares it).
namespace {
std::atomic<bool> g_cudnn_benchmark{false};
}
void set_cudnn_benchmark(bool on) {
  g_cudnn_benchmark = on;
}
bool cudnn_benchmark() {
  return g_cudnn_benchmark;
}

}  // namespace brisk::cuda

namespace brisk::kernels {

namespace {

void check_nchw(const char* op, const char* what, const Tensor& t) {
  BRISK_CHECK(t.dim() == 4, op, ": expected ", what, " of shape (N, C, H, W), got ", t.sizes());
}

// xs: the input's (N, C, H, W) sizes.
void check_window(const char* op, const Shape& xs, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation) {
  BRISK_CHECK(kernel.h > 0 && kernel.w > 0, op, ": kernel size must be positive, got ", kernel, " for input ", xs);
  BRISK_CHECK(stride.h > 0 && stride.w > 0, op, ": stride must be positive, got ", stride, " for input ", xs);
  BRISK_CHECK(dilation.h > 0 && dilation.w > 0, op, ": dilation must be positive, got ", dilation, " for input ", xs);
  BRISK_CHECK(padding.h >= 0 && padding.w >= 0, op, ": padding must be non-negative, got ", padding, " for input ", xs);
  const int64_t eh = dilation.h * (kernel.h - 1) + 1, ew = dilation.w * (kernel.w - 1) + 1;
  BRISK_CHECK(eh <= xs[2] + 2 * padding.h && ew <= xs[3] + 2 * padding.w, op, ": kernel ", kernel, " (dilated to (", eh,
              ", ", ew, ")) is larger than the padded input (", xs[2] + 2 * padding.h, ", ", xs[3] + 2 * padding.w,
              ") of input ", xs);
}

using detail::as_dtype;
// A contiguous tensor in dtype dt (undefined stays undefined: the optional bias).
Tensor dense(const Tensor& t, DType dt) {
  return t.defined() ? contiguous(as_dtype(t, dt)) : t;
}

// The compute dtype of a conv: f16/bf16 run in f32.
DType compute_dtype(DType dt) {
  return dt == DType::F64 ? DType::F64 : DType::F32;
}

cpu::ConvGeom conv_geom(const Tensor& x, const Tensor& w, const Conv2dOptions& o) {
  cpu::ConvGeom g{};
  g.n = x.size(0), g.c_in = x.size(1), g.h = x.size(2), g.w = x.size(3);
  g.c_out = w.size(0), g.kh = w.size(2), g.kw = w.size(3);
  g.sh = o.stride.h, g.sw = o.stride.w, g.ph = o.padding.h, g.pw = o.padding.w;
  g.dh = o.dilation.h, g.dw = o.dilation.w, g.groups = o.groups;
  g.oh = pool_output_size(g.h, g.kh, g.sh, g.ph, g.dh, false);
  g.ow = pool_output_size(g.w, g.kw, g.sw, g.pw, g.dw, false);
  return g;
}

void check_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o) {
  const char* op = "conv2d";
  check_nchw(op, "input", x);
  BRISK_CHECK(w.dim() == 4, op, ": expected weight of shape (C_out, C_in / groups, kH, kW), got ", w.sizes(),
              " for input ", x.sizes());
  check_same_device(op, x, w);
  check_float(op, x);
  check_same_dtype(op, x, w);
  BRISK_CHECK(o.groups > 0, op, ": groups must be positive, got ", o.groups);
  BRISK_CHECK(x.size(1) % o.groups == 0, op, ": groups ", o.groups, " does not divide the input channels of input ",
              x.sizes());
  BRISK_CHECK(w.size(0) % o.groups == 0, op, ": groups ", o.groups, " does not divide the output channels of weight ",
              w.sizes());
  BRISK_CHECK(w.size(1) * o.groups == x.size(1), op, ": input ", x.sizes(), " has ", x.size(1), " channels but weight ",
              w.sizes(), " with groups ", o.groups, " expects ", w.size(1) * o.groups);
  if (b.defined()) {
    check_same_device(op, x, b);
    check_same_dtype(op, x, b);
    BRISK_CHECK(b.dim() == 1 && b.size(0) == w.size(0), op, ": bias of shape ", b.sizes(),
                " does not match the output channels of weight ", w.sizes());
  }
  check_window(op, x.sizes(), {w.size(2), w.size(3)}, o.stride, o.padding, o.dilation);
}

cpu::PoolGeom pool_geom(const Shape& xs, Size2 k, Size2 s, Size2 p, Size2 d, bool ceil_mode) {
  cpu::PoolGeom g{};
  g.planes = xs[0] * xs[1], g.h = xs[2], g.w = xs[3];
  g.kh = k.h, g.kw = k.w, g.sh = s.h, g.sw = s.w, g.ph = p.h, g.pw = p.w, g.dh = d.h, g.dw = d.w;
  g.oh = pool_output_size(g.h, k.h, s.h, p.h, d.h, ceil_mode);
  g.ow = pool_output_size(g.w, k.w, s.w, p.w, d.w, ceil_mode);
  return g;
}

Shape pool_shape(const Shape& xs, const cpu::PoolGeom& g) {
  return {xs[0], xs[1], g.oh, g.ow};
}

// xs: the input's sizes, already checked to be 4-d.
void check_pool_window(const char* op, const Shape& xs, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation) {
  check_window(op, xs, kernel, stride, padding, dilation);
  // As PyTorch: padding at most half the (dilated) window, so no window lies wholly in padding.
  BRISK_CHECK(padding.h <= (dilation.h * (kernel.h - 1) + 1) / 2 && padding.w <= (dilation.w * (kernel.w - 1) + 1) / 2,
              op, ": padding ", padding, " must be at most half the kernel ", kernel, " for input ", xs);
}

void check_pool_input(const char* op, const Tensor& x) {
  check_nchw(op, "input", x);
  check_float(op, x);
}

void check_grad(const char* op, const Tensor& grad, const Shape& expected) {
  BRISK_CHECK(grad.defined(), op, ": undefined grad");
  check_float(op, grad);
  BRISK_CHECK(grad.sizes() == expected, op, ": grad of shape ", grad.sizes(), " does not match the output shape ",
              expected);
}

// The GPU kernels' copy of a pooling geometry.
device::PoolShape device_shape(const cpu::PoolGeom& g) {
  device::PoolShape d;
  d.h = g.h, d.w = g.w, d.oh = g.oh, d.ow = g.ow;
  d.kh = g.kh, d.kw = g.kw, d.sh = g.sh, d.sw = g.sw, d.ph = g.ph, d.pw = g.pw, d.dh = g.dh, d.dw = g.dw;
  return d;
}

// With dilation a window can straddle a small input without any tap landing inside it (taps at
// -1 and 1 of a 1-wide input); its maximum would be -inf with an index outside the input, which
// the backward would scatter into another plane. Such geometries are rejected. (Without
// dilation, padding at most half the kernel already guarantees a tap inside.)
void check_windows_hit_input(const char* op, const Shape& xs, const cpu::PoolGeom& g) {
  auto misses = [](int64_t n_out, int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) -> int64_t {
    if (d == 1) return -1;
    for (int64_t o = 0; o < n_out; ++o) {
      const int64_t start = o * s - p;
      const int64_t first = start >= 0 ? 0 : (-start + d - 1) / d;  // first tap at or after 0
      if (first >= k || start + first * d >= in) return o;
    }
    return -1;
  };
  const int64_t oh = misses(g.oh, g.h, g.kh, g.sh, g.ph, g.dh), ow = misses(g.ow, g.w, g.kw, g.sw, g.pw, g.dw);
  BRISK_CHECK(oh < 0 && ow < 0, op, ": with kernel (", g.kh, ", ", g.kw, "), stride (", g.sh, ", ", g.sw,
              "), padding (", g.ph, ", ", g.pw, ") and dilation (", g.dh, ", ", g.dw, "), output ",
              oh >= 0 ? "row " : "column ", oh >= 0 ? oh : ow, " has no tap inside input ", xs);
}

Size2 stride_or_kernel(Size2 stride, Size2 kernel) {
  return {stride.h == 0 ? kernel.h : stride.h, stride.w == 0 ? kernel.w : stride.w};
}

}  // namespace

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  check_conv(x, weight, bias, o);
  const cpu::ConvGeom g = conv_geom(x, weight, o);
  if (x.device().is_cuda()) {
    Tensor y = empty({g.n, g.c_out, g.oh, g.ow}, x.dtype(), x.device());
    cuda::conv2d(x, weight, bias, o, y);
    return y;
  }
  const DType ct = compute_dtype(x.dtype());
  Tensor y = empty({g.n, g.c_out, g.oh, g.ow}, ct, x.device());
  cpu::conv2d(g, dense(x, ct), dense(weight, ct), dense(bias, ct), y);
  return as_dtype(y, x.dtype());
}

Conv2dGrads conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Conv2dOptions& o,
                            bool need_input, bool need_weight, bool need_bias) {
  check_conv(x, weight, Tensor(), o);
  const cpu::ConvGeom g = conv_geom(x, weight, o);
  check_grad("conv2d_backward", grad_out, {g.n, g.c_out, g.oh, g.ow});
  check_same_device("conv2d_backward", grad_out, x);
  if (x.device().is_cuda()) {
    check_same_dtype("conv2d_backward", grad_out, x);  // the CPU casts; cuDNN takes one dtype
    Conv2dGrads r;
    if (need_input) r.input = empty(x.sizes(), x.dtype(), x.device());
    if (need_weight) r.weight = empty(weight.sizes(), x.dtype(), x.device());
    if (need_bias) r.bias = empty({g.c_out}, x.dtype(), x.device());
    if (need_input || need_weight || need_bias)
      cuda::conv2d_backward(grad_out, x, weight, o, r.input, r.weight, r.bias);
    return r;
  }
  const DType ct = compute_dtype(x.dtype());
  Conv2dGrads r;
  if (need_input) r.input = empty(x.sizes(), ct, x.device());
  if (need_weight) r.weight = empty(weight.sizes(), ct, x.device());
  if (need_bias) r.bias = empty({g.c_out}, ct, x.device());
  if (!need_input && !need_weight && !need_bias) return r;
  cpu::conv2d_backward(g, dense(grad_out, ct), dense(x, ct), dense(weight, ct), r.input, r.weight, r.bias);
  r.input = as_dtype(r.input, x.dtype());
  r.weight = as_dtype(r.weight, x.dtype());
  r.bias = as_dtype(r.bias, x.dtype());
  return r;
}

MaxPool2dResult max_pool2d(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o) {
  const Size2 stride = stride_or_kernel(o.stride, kernel);
  check_pool_input("max_pool2d", x);
  check_pool_window("max_pool2d", x.sizes(), kernel, stride, o.padding, o.dilation);
  const cpu::PoolGeom g = pool_geom(x.sizes(), kernel, stride, o.padding, o.dilation, o.ceil_mode);
  check_windows_hit_input("max_pool2d", x.sizes(), g);
  const Shape ys = pool_shape(x.sizes(), g);
  MaxPool2dResult r{empty(ys, x.dtype(), x.device()), empty(ys, DType::I64, x.device())};
  if (x.device().is_cuda())
    cuda::max_pool2d(device_shape(g), x, r.values, r.indices);
  else
    cpu::max_pool2d(g, contiguous(x), r.values, r.indices);
  return r;
}

static_assert(kMaxPoolDroppedTap == cpu::kDroppedTap);

bool max_pool2d_taps_supported(const Tensor& x, Size2 kernel) {
  return x.defined() && x.device().is_cpu() && kernel.h > 0 && kernel.w > 0 &&
         kernel.h * kernel.w < int64_t{kMaxPoolDroppedTap};
}

MaxPool2dTaps max_pool2d_taps(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o, bool drop_nonpositive) {
  const Size2 stride = stride_or_kernel(o.stride, kernel);
  check_pool_input("max_pool2d", x);
  check_pool_window("max_pool2d", x.sizes(), kernel, stride, o.padding, o.dilation);
  BRISK_CHECK(max_pool2d_taps_supported(x, kernel), "max_pool2d_taps: needs a CPU tensor and a window of fewer than ",
              int{kMaxPoolDroppedTap}, " taps, got kernel ", kernel, " on ", x.device().str(),
              " (use max_pool2d, whose indices have no such limit)");
  const cpu::PoolGeom g = pool_geom(x.sizes(), kernel, stride, o.padding, o.dilation, o.ceil_mode);
  check_windows_hit_input("max_pool2d", x.sizes(), g);
  const Shape ys = pool_shape(x.sizes(), g);
  MaxPool2dTaps r{empty(ys, x.dtype(), x.device()), empty(ys, DType::U8, x.device())};
  cpu::max_pool2d_taps(g, contiguous(x), r.values, r.taps, drop_nonpositive);
  return r;
}

Tensor max_pool2d_taps_backward(const Tensor& grad_out, const Tensor& taps, const Shape& input_sizes, Size2 kernel,
                                const MaxPool2dOptions& o) {
  const char* op = "max_pool2d_backward";
  BRISK_CHECK(input_sizes.size() == 4, op, ": expected a 4-d input shape, got ", input_sizes);
  const Size2 stride = stride_or_kernel(o.stride, kernel);
  check_pool_window(op, input_sizes, kernel, stride, o.padding, o.dilation);
  const cpu::PoolGeom g = pool_geom(input_sizes, kernel, stride, o.padding, o.dilation, o.ceil_mode);
  check_grad(op, grad_out, pool_shape(input_sizes, g));
  BRISK_CHECK(taps.dtype() == DType::U8 && taps.sizes() == grad_out.sizes(), op, ": taps must be u8 of shape ",
              grad_out.sizes(), ", got ", dtype_name(taps.dtype()), " ", taps.sizes());
  BRISK_CHECK(grad_out.device().is_cpu() && taps.device().is_cpu(), op, ": taps are a CPU path, got grad on ",
              grad_out.device().str(), " and taps on ", taps.device().str());
  Tensor gx = empty(input_sizes, grad_out.dtype(), grad_out.device());
  BRISK_CHECK(cpu::max_pool2d_taps_backward(g, contiguous(grad_out), contiguous(taps), gx), op,
              ": a tap lies outside its window or the input (taps must come from max_pool2d_taps with kernel ", kernel,
              " and the same options, for input ", input_sizes, ")");
  return gx;
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_sizes) {
  const char* op = "max_pool2d_backward";
  BRISK_CHECK(input_sizes.size() == 4 && grad_out.dim() == 4, op, ": expected 4-d shapes, got grad ", grad_out.sizes(),
              " and input ", input_sizes);
  check_grad(op, grad_out, indices.sizes());
  BRISK_CHECK(indices.dtype() == DType::I64, op, ": indices must be i64, got ", dtype_name(indices.dtype()));
  check_same_device(op, grad_out, indices);
  BRISK_CHECK(grad_out.size(0) == input_sizes[0] && grad_out.size(1) == input_sizes[1], op, ": grad ", grad_out.sizes(),
              " does not match input ", input_sizes);
  cpu::PoolGeom g{};
  g.planes = input_sizes[0] * input_sizes[1], g.h = input_sizes[2], g.w = input_sizes[3];
  g.oh = grad_out.size(2), g.ow = grad_out.size(3);
  Tensor gx = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (grad_out.device().is_cuda()) {
    cuda::max_pool2d_backward(grad_out, indices, gx);  // checks the indices on the device
    return gx;
  }
  const Tensor idx = contiguous(indices), gy = contiguous(grad_out);
  // The common case (2x2 windows with stride 2, indices from max_pool2d) checks every index
  // against its own window as it writes; anything else is checked here first: an index outside
  // its plane would add into another plane (or past the buffer).
  if (cpu::max_pool2d_backward_disjoint(g, gy, idx, gx)) return gx;
  const int64_t* iv = idx.data<int64_t>();
  const int64_t in_plane = g.h * g.w, count = idx.numel();
  // One branch-free pass finds whether any index is out of range (numel() is a product: not per element).
  bool bad = false;
  for (int64_t i = 0; i < count; ++i) bad |= static_cast<uint64_t>(iv[i]) >= static_cast<uint64_t>(in_plane);
  if (bad)
    for (int64_t i = 0; i < count; ++i)
      BRISK_CHECK(iv[i] >= 0 && iv[i] < in_plane, op, ": index out of range (value ", iv[i], ", limit ", in_plane,
                  ") for input ", input_sizes);
  cpu::max_pool2d_backward(g, gy, idx, gx);
  return gx;
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel, const AvgPool2dOptions& o) {
  const Size2 stride = stride_or_kernel(o.stride, kernel);
  check_pool_input("avg_pool2d", x);
  check_pool_window("avg_pool2d", x.sizes(), kernel, stride, o.padding, 1);
  const cpu::PoolGeom g = pool_geom(x.sizes(), kernel, stride, o.padding, 1, o.ceil_mode);
  Tensor y = empty(pool_shape(x.sizes(), g), x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::avg_pool2d(device_shape(g), o.count_include_pad, x, y);
  else
    cpu::avg_pool2d(g, o.count_include_pad, contiguous(x), y);
  return y;
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, Size2 kernel, const AvgPool2dOptions& o) {
  const Size2 stride = stride_or_kernel(o.stride, kernel);
  BRISK_CHECK(input_sizes.size() == 4, "avg_pool2d_backward: expected a 4-d input shape, got ", input_sizes);
  check_pool_window("avg_pool2d_backward", input_sizes, kernel, stride, o.padding, 1);
  const cpu::PoolGeom g = pool_geom(input_sizes, kernel, stride, o.padding, 1, o.ceil_mode);
  check_grad("avg_pool2d_backward", grad_out, pool_shape(input_sizes, g));
  Tensor gx = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (grad_out.device().is_cuda())
    cuda::avg_pool2d_backward(device_shape(g), o.count_include_pad, grad_out, gx);
  else
    cpu::avg_pool2d_backward(g, o.count_include_pad, contiguous(grad_out), gx);
  return gx;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 out) {
  const char* op = "adaptive_avg_pool2d";
  check_nchw(op, "input", x);
  check_float(op, x);
  BRISK_CHECK(out.h > 0 && out.w > 0, op, ": output size must be positive, got ", out, " for input ", x.sizes());
  BRISK_CHECK(x.size(2) > 0 && x.size(3) > 0, op, ": input ", x.sizes(), " has an empty spatial dim");
  cpu::PoolGeom g{};
  g.planes = x.size(0) * x.size(1), g.h = x.size(2), g.w = x.size(3), g.oh = out.h, g.ow = out.w;
  Tensor y = empty({x.size(0), x.size(1), out.h, out.w}, x.dtype(), x.device());
  if (x.device().is_cuda())
    cuda::adaptive_avg_pool2d(x, y);
  else
    cpu::adaptive_avg_pool2d(g, contiguous(x), y);
  return y;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes) {
  const char* op = "adaptive_avg_pool2d_backward";
  BRISK_CHECK(input_sizes.size() == 4 && grad_out.dim() == 4, op, ": expected 4-d shapes, got grad ", grad_out.sizes(),
              " and input ", input_sizes);
  check_grad(op, grad_out, {input_sizes[0], input_sizes[1], grad_out.size(2), grad_out.size(3)});
  cpu::PoolGeom g{};
  g.planes = input_sizes[0] * input_sizes[1], g.h = input_sizes[2], g.w = input_sizes[3];
  g.oh = grad_out.size(2), g.ow = grad_out.size(3);
  Tensor gx = empty(input_sizes, grad_out.dtype(), grad_out.device());
  if (grad_out.device().is_cuda())
    cuda::adaptive_avg_pool2d_backward(grad_out, gx);
  else
    cpu::adaptive_avg_pool2d_backward(g, contiguous(grad_out), gx);
  return gx;
}

ConvPlanStats conv_plan_stats() {
#if defined(BRISK_WITH_CUDA)
  return cuda::cudnn_conv_plan_stats();
#else
  return {};
#endif
}

void clear_conv_plans([[maybe_unused]] int device) {
#if defined(BRISK_WITH_CUDA)
  cuda::cudnn_conv_clear_plans(device);
#endif
}

}  // namespace brisk::kernels
