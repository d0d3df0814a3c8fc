// 2-D convolution and pooling kernels (NCHW): conv2d forward and backward via im2col + GEMM,
// max/avg/adaptive-avg pooling forward and backward. On the CPU the results are the same bits on
// any thread count (the weight gradient sums the batch in chunks fixed by the batch size).
#pragma once
#include <array>
#include <cstdint>
#include <ostream>

#include "brisk/core/tensor.h"

namespace brisk {

// A (height, width) pair that a single number also converts to: `2` means {2, 2}.
struct Size2 {
  int64_t h = 0;
  int64_t w = 0;
  Size2() = default;
  Size2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit so options read `.stride = 2`
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Size2&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const Size2& s) {
  return os << '(' << s.h << ", " << s.w << ')';
}

// conv2d(x, w, b, {.stride = 2, .padding = {1, 0}, .groups = 4})
struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
};

// max_pool2d(x, 2) or max_pool2d(x, {3, 3}, {.stride = 2, .padding = 1})
struct MaxPool2dOptions {
  Size2 stride = 0;  // 0: the kernel size
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};

// avg_pool2d(x, 2) or avg_pool2d(x, 3, {.stride = 1, .padding = 1, .count_include_pad = false})
struct AvgPool2dOptions {
  Size2 stride = 0;  // 0: the kernel size
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // padded zeros count in the divisor, as PyTorch's default
};

}  // namespace brisk

namespace brisk::kernels {

// Output size of one spatial dim (PyTorch's formula; ceil_mode drops a window that would start
// in the right padding).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode);

// x: (N, C_in, H, W) any strides; weight: (C_out, C_in / groups, kH, kW); bias: (C_out) or
// undefined. Returns y: (N, C_out, OH, OW) contiguous, in x's dtype (f16/bf16 compute in f32).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o = {});

struct Conv2dGrads {
  Tensor input;   // (N, C_in, H, W), undefined unless asked for
  Tensor weight;  // (C_out, C_in / groups, kH, kW)
  Tensor bias;    // (C_out)
};
// grad_out: (N, C_out, OH, OW); x and weight as in the forward. Computes the asked-for grads in
// one pass over the batch; the weight grad is a fixed-order reduction over the batch.
Conv2dGrads conv2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Conv2dOptions& o,
                            bool need_input, bool need_weight, bool need_bias);

// x: (N, C, H, W). Returns values (N, C, OH, OW) and indices (i64, flat h * W + w into each
// input plane, as PyTorch) of each window's maximum (the first one on ties; NaN wins).
struct MaxPool2dResult {
  Tensor values;
  Tensor indices;
};
MaxPool2dResult max_pool2d(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o = {});
// grad_out, indices: (N, C, OH, OW). Returns (N, C, H, W) with `input_sizes`.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_sizes);

// max_pool2d for a backward pass that only scatters: each window's argmax as a one-byte tap
// (i * kW + j, row-major in the window; the same maximum max_pool2d picks), an eighth of the
// indices' bytes. With drop_nonpositive, a window whose maximum is not > 0 gets
// kMaxPoolDroppedTap and no gradient: relu's rule, for pooling a relu output. CPU tensors and
// windows of fewer than 255 taps (max_pool2d_taps_supported); use max_pool2d elsewhere.
inline constexpr uint8_t kMaxPoolDroppedTap = 255;
bool max_pool2d_taps_supported(const Tensor& x, Size2 kernel);
struct MaxPool2dTaps {
  Tensor values;
  Tensor taps;  // u8, (N, C, OH, OW)
};
MaxPool2dTaps max_pool2d_taps(const Tensor& x, Size2 kernel, const MaxPool2dOptions& o = {},
                              bool drop_nonpositive = false);
// grad_out, taps: (N, C, OH, OW) from max_pool2d_taps with the same kernel and options. Returns
// (N, C, H, W) with `input_sizes`, the same bits as max_pool2d_backward with the indices.
Tensor max_pool2d_taps_backward(const Tensor& grad_out, const Tensor& taps, const Shape& input_sizes, Size2 kernel,
                                const MaxPool2dOptions& o = {});

// x: (N, C, H, W) -> (N, C, OH, OW).
Tensor avg_pool2d(const Tensor& x, Size2 kernel, const AvgPool2dOptions& o = {});
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, Size2 kernel, const AvgPool2dOptions& o);

// x: (N, C, H, W) -> (N, C, out.h, out.w); window i spans [floor(i*H/OH), ceil((i+1)*H/OH)).
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 out);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes);

}  // namespace brisk::kernels
