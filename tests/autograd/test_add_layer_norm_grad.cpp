// add_layer_norm (the residual add and the LayerNorm after it as one differentiable op): its two
// outputs and the gradients of x, residual, weight and bias are those of `h = x + residual;
// layer_norm(h)` bit for bit (f32, bf16, f16 and f64; h used downstream or not; mixed dtypes as the
// add promotes them; under autocast), a float64 gradient check, and bad inputs name the op.
#include <gtest/gtest.h>

#include <brisk/amp/autocast.h>
#include <brisk/autograd/ops_loss.h>
#include <brisk/brisk.h>

#include <string>
#include <vector>

#include "common/errors.h"
#include "common/gradcheck.h"

using namespace brisk;
using brisk::testing::expect_error;
using brisk::testing::expect_gradcheck_layouts;
using brisk::testing::leaf;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dt = DType::F32) {
  Generator gen(seed);
  return randn(s, {}, &gen).to(dt);
}

// Equal values, element by element (== : -0 and +0 are equal).
bool equal(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         sum(eq(a, b)).item<int64_t>() == a.numel();
}

struct Outputs {
  Tensor h, y, gx, gr, gw, gb;
};

// h and y of the fused op or of the composition, and the gradients of a loss that uses y and,
// when use_h, h too (through a product, as the next residual add and its branch would).
Outputs run(bool fused, DType xdt, DType rdt, DType pdt, bool use_h, int64_t D = 40) {
  Tensor x = leaf(rnd({3, 5, D}, 1, xdt)), r = leaf(rnd({3, 5, D}, 2, rdt));
  Tensor w = leaf(rnd({D}, 3, pdt)), b = leaf(rnd({D}, 4, pdt));
  Tensor h, y;
  if (fused) {
    AddLayerNormOutput o = add_layer_norm(x, r, {D}, w, b, 1e-5);
    h = o.h, y = o.y;
  } else {
    h = x + r;
    y = layer_norm(h, {D}, w, b, 1e-5);
  }
  Tensor loss = sum(y.to(DType::F32) * rnd({3, 5, D}, 5));
  if (use_h) loss = loss + sum(h.to(DType::F32) * rnd({3, 5, D}, 6));
  loss.backward();
  return {h.detach(), y.detach(), x.grad(), r.grad(), w.grad(), b.grad()};
}

void expect_same(const Outputs& f, const Outputs& u, const std::string& what) {
  EXPECT_TRUE(equal(f.h, u.h)) << what << ": h";
  EXPECT_TRUE(equal(f.y, u.y)) << what << ": y";
  EXPECT_TRUE(equal(f.gx, u.gx)) << what << ": grad x";
  EXPECT_TRUE(equal(f.gr, u.gr)) << what << ": grad residual";
  EXPECT_TRUE(equal(f.gw, u.gw)) << what << ": grad weight";
  EXPECT_TRUE(equal(f.gb, u.gb)) << what << ": grad bias";
}

}  // namespace

TEST(AddLayerNormGrad, MatchesTheComposition) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::F64})
    for (bool use_h : {true, false})
      for (int64_t D : {1, 7, 40}) {
        const std::string what =
            std::string(dtype_name(dt)) + (use_h ? " h used" : " h unused") + " D=" + std::to_string(D);
        expect_same(run(true, dt, dt, dt, use_h, D), run(false, dt, dt, dt, use_h, D), what);
      }
}

TEST(AddLayerNormGrad, MixedDtypesPromoteAsTheAdd) {
  // An f32 residual stream plus a bf16 branch (what autocast's linear layers give): h is f32.
  const Outputs f = run(true, DType::F32, DType::BF16, DType::F32, true);
  EXPECT_EQ(f.h.dtype(), DType::F32);
  EXPECT_EQ(f.gr.dtype(), DType::BF16);
  expect_same(f, run(false, DType::F32, DType::BF16, DType::F32, true), "f32 + bf16");
  expect_same(run(true, DType::BF16, DType::F32, DType::F32, false),
              run(false, DType::BF16, DType::F32, DType::F32, false), "bf16 + f32");
}

TEST(AddLayerNormGrad, UnderAutocastMatchesTheComposition) {
  for (DType dt : {DType::F32, DType::BF16}) {
    amp::Autocast ac(DType::BF16);
    const Outputs f = run(true, dt, dt, DType::F32, true), u = run(false, dt, dt, DType::F32, true);
    EXPECT_EQ(f.y.dtype(), DType::F32) << "layer norm runs in f32 under autocast";
    expect_same(f, u, std::string("autocast, ") + dtype_name(dt) + " inputs");
  }
}

TEST(AddLayerNormGrad, GradcheckInputResidualWeightBias) {
  Generator gen(31);
  Tensor x = randn({3, 2, 4}, {.dtype = DType::F64}, &gen), r = randn({3, 2, 4}, {.dtype = DType::F64}, &gen);
  Tensor w = randn({2, 4}, {.dtype = DType::F64}, &gen), b = randn({2, 4}, {.dtype = DType::F64}, &gen);
  // Both outputs in one function: 0.7 * h + y.
  expect_gradcheck_layouts(
      [](const std::vector<Tensor>& v) {
        AddLayerNormOutput o = add_layer_norm(v[0], v[1], {2, 4}, v[2], v[3]);
        return o.h * 0.7 + o.y;
      },
      {x, r, w, b}, "add_layer_norm affine");
  expect_gradcheck_layouts([](const std::vector<Tensor>& v) { return add_layer_norm(v[0], v[1], {4}).y; }, {x, r},
                           "add_layer_norm plain, y only");
}

TEST(AddLayerNormGrad, NoGraphWithoutGradAndErrorsNameTheOp) {
  Tensor x = rnd({2, 3, 8}, 1), r = rnd({2, 3, 8}, 2);
  AddLayerNormOutput o = add_layer_norm(x, r, {8});
  EXPECT_FALSE(o.h.requires_grad());
  EXPECT_FALSE(o.y.requires_grad());
  expect_error([&] { add_layer_norm(x, rnd({3, 8}, 3), {8}); }, "add_layer_norm: input [2, 3, 8] and residual [3, 8]");
  expect_error([&] { add_layer_norm(x, r, {3}); }, "add_layer_norm: normalized_shape [3]");
  expect_error([&] { add_layer_norm(Tensor(), r, {8}); }, "add_layer_norm: undefined");
}

TEST(AddLayerNormGrad, InPlaceChangeOfTheSumIsCaught) {
  Tensor x = leaf(rnd({2, 8}, 1)), r = leaf(rnd({2, 8}, 2)), w = leaf(rnd({8}, 3));
  AddLayerNormOutput o = add_layer_norm(x, r, {8}, w);
  Tensor loss = sum(o.y * o.y);
  {
    NoGradGuard ng;
    o.h.add_(1.0);  // the backward reads h
  }
  EXPECT_THROW(loss.backward(), Error);
}
