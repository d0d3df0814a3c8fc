// CUDA cases of the conv family: conv2d and its gradients (1x1, 3x3 and 5x5 kernels, stride,
// padding, dilation, groups, depthwise, with and without bias, any subset of the gradients,
// TF32 on and off) and 2-D pooling forward and backward (ceil_mode, padding, dilation, ties,
// NaN, overlapping windows, planes longer than a warp's 32 outputs, upsampling adaptive windows).
//
// The convolution cases compare with cuDNN's TF32 off (the CPU computes in exact f32); one case
// keeps PyTorch's default (TF32 on) with a tolerance to match. cuDNN may pick FFT or Winograd
// algorithms, whose rounding differs more from the CPU's direct sums: tolerance_scale 10 (fp32
// rtol 1.3e-5, atol 1e-4). 16-bit outputs are rounded once on both sides (cuDNN adds the
// convolution onto the preloaded bias in f32), so they differ by at most one rounding step.
// Pooling follows the CPU's order of operations exactly: max pooling is compared bit for bit.
#include <brisk/kernels/conv.h>

#include <cmath>
#include <limits>
#include <utility>

#include "cuda/op_cases.h"

namespace brisk::testing {
namespace {

using kernels::Conv2dGrads;

constexpr double kConvScale = 10;
// TF32 keeps 10 mantissa bits: fp32 rtol 3.9e-4, atol 3e-3 against the CPU's exact f32.
constexpr double kTf32Scale = 300;

// Turns cuDNN's TF32 off for one case run (no effect on the CPU run).
class Tf32Off {
 public:
  Tf32Off() : prev_(cuda::cudnn_allow_tf32()) { cuda::set_cudnn_allow_tf32(false); }
  ~Tf32Off() { cuda::set_cudnn_allow_tf32(prev_); }
  Tf32Off(const Tf32Off&) = delete;
  Tf32Off& operator=(const Tf32Off&) = delete;

 private:
  bool prev_;
};

struct ConvSetup {
  Shape x, w;
  Conv2dOptions o;
  bool bias = true;
};

// The shapes every conv case runs: 3x3 padded, 5x5 strided and dilated, 1x1 without bias,
// grouped with asymmetric stride and padding, depthwise.
std::vector<ConvSetup> setups() {
  return {
      {{2, 3, 9, 11}, {8, 3, 3, 3}, {.padding = 1}},
      {{2, 4, 17, 15}, {6, 4, 5, 5}, {.stride = 2, .padding = 2, .dilation = 2}},
      {{3, 16, 7, 7}, {32, 16, 1, 1}, {}, false},
      {{2, 6, 10, 10}, {9, 2, 3, 3}, {.stride = {2, 1}, .padding = {1, 0}, .groups = 3}},
      {{2, 8, 12, 12}, {8, 1, 3, 3}, {.padding = 1, .groups = 8}},
  };
}

Shape conv_out(const ConvSetup& s) {
  const int64_t oh = kernels::pool_output_size(s.x[2], s.w[2], s.o.stride.h, s.o.padding.h, s.o.dilation.h, false);
  const int64_t ow = kernels::pool_output_size(s.x[3], s.w[3], s.o.stride.w, s.o.padding.w, s.o.dilation.w, false);
  return {s.x[0], s.w[0], oh, ow};
}

std::vector<Tensor> run_forward(const CaseEnv& e) {
  std::vector<Tensor> out;
  uint64_t seed = 100;
  for (const ConvSetup& s : setups()) {
    Tensor x = in(e, s.x, seed++), w = in(e, s.w, seed++);
    Tensor b = s.bias ? in(e, {s.w[0]}, seed++) : Tensor();
    out.push_back(kernels::conv2d(x, w, b, s.o));
  }
  return out;
}

// All three gradients for every setup, then subsets on the first two.
std::vector<Tensor> run_backward(const CaseEnv& e) {
  std::vector<Tensor> out;
  uint64_t seed = 200;
  int i = 0;
  for (const ConvSetup& s : setups()) {
    Tensor x = in(e, s.x, seed++), w = in(e, s.w, seed++), gy = in(e, conv_out(s), seed++);
    Conv2dGrads r = kernels::conv2d_backward(gy, x, w, s.o, true, true, true);
    out.insert(out.end(), {r.input, r.weight, r.bias});
    if (i++ < 2) {
      Conv2dGrads only_x = kernels::conv2d_backward(gy, x, w, s.o, true, false, false);
      Conv2dGrads w_and_b = kernels::conv2d_backward(gy, x, w, s.o, false, true, true);
      out.insert(out.end(), {only_x.input, only_x.weight, w_and_b.weight, w_and_b.bias});
    }
  }
  return out;
}

// Integer values in [-3, 3) in the case's dtype and layout: many ties within each window.
Tensor tied_integers(const CaseEnv& e, const Shape& s, uint64_t seed) {
  Tensor x = in(e, s, seed);
  kernels::copy_(x, e.input_as(s, DType::I32, seed, -3, 3));
  return x;
}

MaxPool2dOptions overlapping() {
  return {.stride = 1, .padding = 1};
}

const CaseRegistrar conv_cases{
    {.op = "conv2d",
     .variant = "1x1, 3x3, 5x5; stride, padding, dilation, groups, depthwise (TF32 off)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tf32Off off;
           return run_forward(e);
         },
     .tolerance_scale = kConvScale},
    {.op = "conv2d",
     .variant = "TF32 on (the default)",
     .run =
         [](const CaseEnv& e) {
           Tensor x = in(e, {2, 5, 12, 10}, 300), w = in(e, {7, 5, 3, 3}, 301), b = in(e, {7}, 302);
           return std::vector<Tensor>{kernels::conv2d(x, w, b, {.padding = 1})};
         },
     .tolerance_scale = kTf32Scale},
    {.op = "conv2d",
     .variant = "empty batch and no input channels",
     .run =
         [](const CaseEnv& e) {
           Tf32Off off;
           Tensor w = in(e, {4, 3, 3, 3}, 303), b = in(e, {4}, 304);
           return std::vector<Tensor>{kernels::conv2d(in(e, {0, 3, 5, 5}, 305), w, b),
                                      kernels::conv2d(in(e, {2, 0, 5, 5}, 306), in(e, {4, 0, 3, 3}, 307), b)};
         },
     .tolerance_scale = kConvScale},
    {.op = "conv2d_backward",
     .variant = "input, weight and bias grads, alone and together (TF32 off)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tf32Off off;
           return run_backward(e);
         },
     .tolerance_scale = kConvScale},
    {.op = "conv2d_backward",
     .variant = "empty batch: zero weight and bias grads",
     .run =
         [](const CaseEnv& e) {
           Tf32Off off;
           Conv2dGrads r = kernels::conv2d_backward(in(e, {0, 4, 3, 3}, 310), in(e, {0, 3, 5, 5}, 311),
                                                    in(e, {4, 3, 3, 3}, 312), {}, true, true, true);
           return std::vector<Tensor>{r.input, r.weight, r.bias};
         },
     .tolerance_scale = kConvScale},

    {.op = "max_pool2d",
     .variant = "2x2 stride 2, odd width; 3x3 stride 2 padding 1 dilation 2 ceil_mode",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           auto a = kernels::max_pool2d(in(e, {2, 3, 8, 9}, 400), 2);
           auto b = kernels::max_pool2d(in(e, {2, 3, 13, 11}, 401), 3,
                                        {.stride = 2, .padding = 1, .dilation = 2, .ceil_mode = true});
           auto c = kernels::max_pool2d(in(e, {1, 2, 7, 7}, 402), 2, {.ceil_mode = true});  // partial last window
           return std::vector<Tensor>{a.values, a.indices, b.values, b.indices, c.values, c.indices};
         },
     .exact = true},
    {.op = "max_pool2d",
     .variant = "ties, NaN, -inf, overlapping windows on a 40x45 plane",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = tied_integers(e, {2, 2, 40, 45}, 403);
           kernels::fill_(x.select(2, 5), std::nan(""));  // a row of NaN
           kernels::fill_(x.narrow(3, 7, 2), -std::numeric_limits<double>::infinity());
           auto a = kernels::max_pool2d(x, {3, 2}, overlapping());
           auto b = kernels::max_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true});
           return std::vector<Tensor>{a.values, a.indices, b.values, b.indices};
         },
     .exact = true},
    {.op = "max_pool2d_backward",
     .variant = "non-overlapping and overlapping windows (gradients add in the CPU's order)",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           std::vector<Tensor> out;
           Tensor x = tied_integers(e, {2, 3, 40, 45}, 410);
           for (auto [k, o] : std::vector<std::pair<Size2, MaxPool2dOptions>>{
                    {2, {}},
                    {3, overlapping()},
                    {{3, 2}, {.stride = 2, .padding = 1, .dilation = 2, .ceil_mode = true}}}) {
             auto r = kernels::max_pool2d(x, k, o);
             Tensor gy = in(e, r.values.sizes(), 411);
             out.push_back(kernels::max_pool2d_backward(gy, r.indices, x.sizes()));
           }
           return out;
         }},

    {.op = "avg_pool2d",
     .variant = "count_include_pad both ways, ceil_mode, padding",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           Tensor x = in(e, {2, 3, 13, 11}, 420);
           return std::vector<Tensor>{
               kernels::avg_pool2d(x, 2), kernels::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true}),
               kernels::avg_pool2d(x, 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}),
               kernels::avg_pool2d(x, {3, 2}, {.stride = 1, .padding = {1, 0}})};
         }},
    {.op = "avg_pool2d_backward",
     .variant = "count_include_pad both ways, ceil_mode, overlapping windows",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           const Shape xs = {2, 3, 13, 11};
           std::vector<Tensor> out;
           uint64_t seed = 430;
           for (auto [k, o] : std::vector<std::pair<Size2, AvgPool2dOptions>>{
                    {2, {}},
                    {3, {.stride = 2, .padding = 1, .ceil_mode = true}},
                    {3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}},
                    {{3, 2}, {.stride = 1, .padding = {1, 0}}}}) {
             const Shape ys = kernels::avg_pool2d(in(e, xs, seed), k, o).sizes();
             out.push_back(kernels::avg_pool2d_backward(in(e, ys, seed + 1), xs, k, o));
             seed += 2;
           }
           return out;
         }},
    {.op = "adaptive_avg_pool2d",
     .variant = "shrinking and growing windows",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{kernels::adaptive_avg_pool2d(in(e, {2, 3, 10, 13}, 440), {4, 5}),
                                      kernels::adaptive_avg_pool2d(in(e, {1, 2, 3, 3}, 441), {7, 5}),
                                      kernels::adaptive_avg_pool2d(in(e, {2, 4, 7, 7}, 442), 1)};
         }},
    {.op = "adaptive_avg_pool2d_backward",
     .variant = "shrinking and growing windows",
     .dtypes = kFloatingDTypes,
     .run =
         [](const CaseEnv& e) {
           return std::vector<Tensor>{kernels::adaptive_avg_pool2d_backward(in(e, {2, 3, 4, 5}, 450), {2, 3, 10, 13}),
                                      kernels::adaptive_avg_pool2d_backward(in(e, {1, 2, 7, 5}, 451), {1, 2, 3, 3}),
                                      kernels::adaptive_avg_pool2d_backward(in(e, {2, 4, 1, 1}, 452), {2, 4, 7, 7})};
         }},
};

}  // namespace
}  // namespace brisk::testing
