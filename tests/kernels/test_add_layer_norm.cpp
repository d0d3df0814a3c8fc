// kernels::add_layer_norm (the residual add fused with layer norm) on the CPU: h, y, mean and
// rstd bit for bit those of binary add then layer_norm, and the backward those of
// layer_norm_backward plus the add of h's gradient, for f64, f32, bf16 and f16 on row widths
// 1, 3, 7, 33, 768 and 1000 (odd widths leave vector tails), with and without the affine
// parameters; the same bits on 1 to 4 threads; bad arguments name the op and the shapes (a
// device mismatch: tests/cuda/test_add_layer_norm.cpp).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/nn.h>
#include <brisk/kernels/threads.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dt, double scale = 1.0, double shift = 0.0) {
  Generator gen(seed);
  return (randn(s, {}, &gen) * scale + shift).to(dt);
}

// Whether a and b hold the same bytes (so -0 vs +0 and NaN payloads count).
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << shape_str(a.sizes()) << " " << dtype_name(a.dtype()) << " vs "
                                         << shape_str(b.sizes()) << " " << dtype_name(b.dtype());
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const size_t w = ac.element_size();
  const auto* pa = static_cast<const unsigned char*>(ac.data_ptr());
  const auto* pb = static_cast<const unsigned char*>(bc.data_ptr());
  for (int64_t i = 0; i < ac.numel(); ++i)
    if (std::memcmp(pa + i * w, pb + i * w, w) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << " of " << ac.numel() << " differs: " << ac.reshape({-1}).select(0, i).item<double>()
             << " vs " << bc.reshape({-1}).select(0, i).item<double>();
  return ::testing::AssertionSuccess();
}

const DType kDtypes[] = {DType::F64, DType::F32, DType::BF16, DType::F16};
const int64_t kWidths[] = {1, 3, 7, 33, 768, 1000};

}  // namespace

TEST(AddLayerNorm, ForwardIsAddThenLayerNormBitForBit) {
  for (DType dt : kDtypes) {
    for (int64_t D : kWidths) {
      for (int affine = 0; affine < 3; ++affine) {  // weight and bias, weight only, neither
        const std::string what =
            std::string(dtype_name(dt)) + " D=" + std::to_string(D) + " affine " + std::to_string(affine);
        // Rows with a large mean next to the residual: the add rounds in the 16-bit types.
        Tensor x = rnd({2, 5, D}, 10 + D, dt, 1.0, 3.0), r = rnd({2, 5, D}, 20 + D, dt, 0.3);
        Tensor w = affine < 2 ? rnd({D}, 30 + D, dt) : Tensor(), b = affine < 1 ? rnd({D}, 40 + D, dt) : Tensor();
        kernels::AddLayerNormResult f = kernels::add_layer_norm(x, r, {D}, w, b, 1e-5);
        Tensor h = kernels::binary(kernels::BinaryOp::Add, x, r);
        kernels::LayerNormResult u = kernels::layer_norm(h, {D}, w, b, 1e-5);
        EXPECT_TRUE(same_bits(f.h, h)) << what << ": h";
        EXPECT_TRUE(same_bits(f.y, u.y)) << what << ": y";
        EXPECT_TRUE(same_bits(f.mean, u.mean)) << what << ": mean";
        EXPECT_TRUE(same_bits(f.rstd, u.rstd)) << what << ": rstd";
      }
    }
  }
}

TEST(AddLayerNorm, MultiDimNormalizedShapeAndStridedInputs) {
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor x = rnd({4, 3, 11}, 1, dt), r = rnd({11, 3, 4}, 2, dt).permute({2, 1, 0});  // r strided
    Tensor w = rnd({3, 11}, 3, dt), b = rnd({3, 11}, 4, dt);
    kernels::AddLayerNormResult f = kernels::add_layer_norm(x, r, {3, 11}, w, b, 1e-3);
    Tensor h = kernels::binary(kernels::BinaryOp::Add, x, r);
    kernels::LayerNormResult u = kernels::layer_norm(h, {3, 11}, w, b, 1e-3);
    EXPECT_TRUE(same_bits(f.h, h)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(f.y, u.y)) << dtype_name(dt);
    EXPECT_EQ(f.mean.sizes(), (Shape{4}));
  }
}

TEST(AddLayerNorm, BackwardIsLayerNormBackwardPlusGradOfTheSum) {
  for (DType dt : kDtypes) {
    for (int64_t D : kWidths) {
      const std::string what = std::string(dtype_name(dt)) + " D=" + std::to_string(D);
      Tensor x = rnd({7, D}, 50 + D, dt, 1.0, 1.0), r = rnd({7, D}, 60 + D, dt);
      Tensor w = rnd({D}, 70 + D, dt), b = rnd({D}, 80 + D, dt);
      Tensor gy = rnd({7, D}, 90 + D, dt), gh = rnd({7, D}, 100 + D, dt, 0.5);
      kernels::AddLayerNormResult f = kernels::add_layer_norm(x, r, {D}, w, b, 1e-5);
      kernels::LayerNormGrads u = kernels::layer_norm_backward(gy, f.h, f.mean, f.rstd, w, {true, true, true});
      // With the gradient of h: h's two gradients added as the autograd engine adds them.
      kernels::LayerNormGrads g = kernels::add_layer_norm_backward(gy, gh, f.h, f.mean, f.rstd, w, {true, true, true});
      EXPECT_TRUE(same_bits(g.dx, kernels::binary(kernels::BinaryOp::Add, u.dx, gh))) << what << ": dx";
      EXPECT_TRUE(same_bits(g.dweight, u.dweight)) << what << ": dweight";
      EXPECT_TRUE(same_bits(g.dbias, u.dbias)) << what << ": dbias";
      // Without it: layer norm's gradients alone; only what is asked for.
      kernels::LayerNormGrads n =
          kernels::add_layer_norm_backward(gy, Tensor(), f.h, f.mean, f.rstd, w, {true, false, true});
      EXPECT_TRUE(same_bits(n.dx, u.dx)) << what << ": dx without grad_h";
      EXPECT_FALSE(n.dweight.defined()) << what;
      EXPECT_TRUE(same_bits(n.dbias, u.dbias)) << what;
      // No weight: the gradient of the plain norm.
      kernels::AddLayerNormResult p = kernels::add_layer_norm(x, r, {D}, Tensor(), Tensor(), 1e-5);
      kernels::LayerNormGrads pu =
          kernels::layer_norm_backward(gy, p.h, p.mean, p.rstd, Tensor(), {true, false, false});
      kernels::LayerNormGrads pg =
          kernels::add_layer_norm_backward(gy, gh, p.h, p.mean, p.rstd, Tensor(), {true, false, false});
      EXPECT_TRUE(same_bits(pg.dx, kernels::binary(kernels::BinaryOp::Add, pu.dx, gh))) << what << ": no weight";
    }
  }
}

TEST(AddLayerNorm, EmptyInputs) {
  kernels::AddLayerNormResult f =
      kernels::add_layer_norm(zeros({0, 8}), zeros({0, 8}), {8}, ones({8}), zeros({8}), 1e-5);
  EXPECT_EQ(f.h.sizes(), (Shape{0, 8}));
  EXPECT_EQ(f.mean.numel(), 0);
  kernels::LayerNormGrads g = kernels::add_layer_norm_backward(zeros({0, 8}), zeros({0, 8}), f.h, f.mean, f.rstd,
                                                               ones({8}), {true, true, true});
  EXPECT_EQ(g.dx.sizes(), (Shape{0, 8}));
  EXPECT_EQ(g.dweight.to_vector<float>(), std::vector<float>(8, 0.0f));
}

TEST(AddLayerNorm, SameBitsOnAnyThreadCount) {
  // 517 x 1000 values: well past the size at which rows and column blocks are split over threads.
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor x = rnd({517, 1000}, 111, dt), r = rnd({517, 1000}, 112, dt), w = rnd({1000}, 113, dt);
    Tensor b = rnd({1000}, 114, dt), gy = rnd({517, 1000}, 115, dt), gh = rnd({517, 1000}, 116, dt);
    const int saved = get_num_threads();
    std::vector<Tensor> ref;
    for (int threads : {1, 2, 3, 4}) {
      set_num_threads(threads);
      kernels::AddLayerNormResult f = kernels::add_layer_norm(x, r, {1000}, w, b, 1e-5);
      kernels::LayerNormGrads g = kernels::add_layer_norm_backward(gy, gh, f.h, f.mean, f.rstd, w, {true, true, true});
      std::vector<Tensor> outs{f.h, f.y, f.mean, f.rstd, g.dx, g.dweight, g.dbias};
      if (ref.empty()) {
        ref = outs;
        continue;
      }
      for (size_t i = 0; i < outs.size(); ++i)
        EXPECT_TRUE(same_bits(outs[i], ref[i])) << dtype_name(dt) << " output " << i << " on " << threads << " threads";
    }
    set_num_threads(saved);
  }
}

TEST(AddLayerNorm, BadArgumentsNameTheOpAndShapes) {
  Tensor x = zeros({2, 3, 8}), w = ones({8});
  expect_error([&] { kernels::add_layer_norm(x, zeros({2, 4, 8}), {8}, w, Tensor(), 1e-5); }, "[2, 4, 8]");
  expect_error([&] { kernels::add_layer_norm(x, zeros({8}), {8}, w, Tensor(), 1e-5); },
               "add_layer_norm: input [2, 3, 8]");
  expect_error(
      [&] {
        kernels::add_layer_norm(x, zeros({2, 3, 8}, {.dtype = DType::BF16}), {8}, w, Tensor(), 1e-5);
      },
      "add_layer_norm: dtype mismatch: input f32 vs residual bf16");
  expect_error([&] { kernels::add_layer_norm(x, x, {4}, Tensor(), Tensor(), 1e-5); },
               "add_layer_norm: normalized_shape [4] does not match the trailing dims of input [2, 3, 8]");
  expect_error([&] { kernels::add_layer_norm(x, x, {8}, ones({4}), Tensor(), 1e-5); }, "add_layer_norm: weight [4]");
  expect_error([&] { kernels::add_layer_norm(x, x, {8}, w, zeros({8}, {.dtype = DType::F64}), 1e-5); },
               "add_layer_norm: dtype mismatch: input f32 vs bias f64");
  expect_error([&] { kernels::add_layer_norm(x, x, {8}, w, Tensor(), -1.0); }, "add_layer_norm: eps");
  expect_error([&] { kernels::add_layer_norm(Tensor(), x, {8}, w, Tensor(), 1e-5); }, "add_layer_norm: undefined");
  expect_error(
      [&] {
        kernels::add_layer_norm(zeros({2, 8}, {.dtype = DType::I64}), zeros({2, 8}, {.dtype = DType::I64}), {8},
                                Tensor(), Tensor(), 1e-5);
      },
      "add_layer_norm");
  kernels::AddLayerNormResult f = kernels::add_layer_norm(x, x, {8}, w, Tensor(), 1e-5);
  expect_error(
      [&] {
        kernels::add_layer_norm_backward(zeros({2, 8}), Tensor(), f.h, f.mean, f.rstd, w, {true, true, true});
      },
      "add_layer_norm backward: grad [2, 8] does not match input [2, 3, 8]");
  expect_error(
      [&] {
        kernels::add_layer_norm_backward(zeros({2, 3, 8}), zeros({3, 8}), f.h, f.mean, f.rstd, w, {true, true, true});
      },
      "add_layer_norm backward: grad of the sum [3, 8]");
}
