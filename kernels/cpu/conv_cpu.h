// CPU convolution and pooling implementations behind kernels/conv.h (internal header).
// Inputs are contiguous and already validated; outputs are preallocated and contiguous.
#pragma once
#include <cstdint>

#include "brisk/core/tensor.h"
#include "cpu/isa.h"

namespace brisk::kernels::cpu {

// Sizes of one conv2d call, all validated.
struct ConvGeom {
  int64_t n, c_in, h, w;  // input
  int64_t c_out, kh, kw;  // weight (c_out, c_in / groups, kh, kw)
  int64_t oh, ow;         // output
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t groups;
};

// Sizes of one pooling call over planes = N * C planes of (h, w) -> (oh, ow).
struct PoolGeom {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// max_pool2d_taps's code for a window whose gradient is dropped.
inline constexpr uint8_t kDroppedTap = 255;

// Declared once per instruction set; cpu::<name> calls the active one (cpu/isa.h).
// clang-format off
BRISK_CPU_KERNELS(
// x: (N, C_in, H, W), w: (C_out, C_in/G, kH, kW), b: (C_out) or undefined, y: (N, C_out, OH, OW);
// all contiguous, same dtype (f32 or f64).
void conv2d(const ConvGeom& g, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);
// gy: (N, C_out, OH, OW); gx / gw / gb: outputs shaped like x / w / b, each skipped if undefined.
void conv2d_backward(const ConvGeom& g, const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx,
                     const Tensor& gw, const Tensor& gb);
// x: (planes, H, W) -> values, indices (i64): (planes, OH, OW); any float dtype.
void max_pool2d(const PoolGeom& g, const Tensor& x, const Tensor& values, const Tensor& indices);
// The same with each argmax as a u8 tap in its window (i * kW + j); with drop_nonpositive,
// kDroppedTap where the maximum is not > 0. Windows of fewer than 255 taps.
void max_pool2d_taps(const PoolGeom& g, const Tensor& x, const Tensor& values, const Tensor& taps,
                     bool drop_nonpositive);
// gx (planes, H, W) from gy and max_pool2d_taps's taps (kDroppedTap: no gradient). false, with gx
// partly written, when a tap lies outside its window or the input.
bool max_pool2d_taps_backward(const PoolGeom& g, const Tensor& gy, const Tensor& taps, const Tensor& gx);
// gx (planes, H, W) = scatter-add of gy by indices (each index already checked to lie in its plane).
void max_pool2d_backward(const PoolGeom& g, const Tensor& gy, const Tensor& indices, const Tensor& gx);
// The same for disjoint windows (2x2, stride 2, as max_pool2d's indices for them are), written
// without a zero fill or scatter, each index checked to lie in its own output's window on the
// way. false when this path does not apply (another shape, dtype or instruction set) or an index
// lies elsewhere: gx is then partly written and max_pool2d_backward must produce it.
bool max_pool2d_backward_disjoint(const PoolGeom& g, const Tensor& gy, const Tensor& indices, const Tensor& gx);
void avg_pool2d(const PoolGeom& g, bool count_include_pad, const Tensor& x, const Tensor& y);
void avg_pool2d_backward(const PoolGeom& g, bool count_include_pad, const Tensor& gy, const Tensor& gx);
// Only planes, h, w, oh, ow of g are used.
void adaptive_avg_pool2d(const PoolGeom& g, const Tensor& x, const Tensor& y);
void adaptive_avg_pool2d_backward(const PoolGeom& g, const Tensor& gy, const Tensor& gx);
)
// clang-format on

BRISK_CPU_DISPATCH_FN(conv2d);
BRISK_CPU_DISPATCH_FN(conv2d_backward);
BRISK_CPU_DISPATCH_FN(max_pool2d);
BRISK_CPU_DISPATCH_FN(max_pool2d_backward);
BRISK_CPU_DISPATCH_FN(max_pool2d_backward_disjoint);
BRISK_CPU_DISPATCH_FN(max_pool2d_taps);
BRISK_CPU_DISPATCH_FN(max_pool2d_taps_backward);
BRISK_CPU_DISPATCH_FN(avg_pool2d);
BRISK_CPU_DISPATCH_FN(avg_pool2d_backward);
BRISK_CPU_DISPATCH_FN(adaptive_avg_pool2d);
BRISK_CPU_DISPATCH_FN(adaptive_avg_pool2d_backward);

}  // namespace brisk::kernels::cpu
