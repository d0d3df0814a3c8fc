// In-place ops under autograd (as in PyTorch; docs/for-libtorch-users.md): on a tensor with history the
// op is recorded and the history rebased, so gradients equal those of the out-of-place program;
// a tensor without history takes one from an operand that requires grad; leaves that require
// grad, views, and views whose base changed are refused with messages that say what to do.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::expect_error;
using brisk::testing::seeded_randn;

namespace {

Tensor leaf_input(const Shape& s, uint64_t seed) {
  Tensor t = seeded_randn(s, seed);
  t.requires_grad_();
  return t;
}

std::vector<double> values(const Tensor& t) {
  return t.to_vector<double>();
}

// Runs `program` (x, o) -> y on fresh leaves and returns (y, dx, do) with a weighted-sum loss, so
// every output element's gradient differs.
struct Run {
  std::vector<double> y, dx, dother;
};
Run run(const std::function<Tensor(const Tensor&, const Tensor&)>& program, const Shape& other_shape) {
  Tensor x = leaf_input({3, 4}, 1), other = leaf_input(other_shape, 2);
  Tensor y = program(x, other);
  Tensor w = seeded_randn(y.sizes(), 3);
  (y * w).sum().backward();
  return {values(y), x.grad().defined() ? values(x.grad()) : std::vector<double>{},
          other.grad().defined() ? values(other.grad()) : std::vector<double>{}};
}

void expect_same_run(const std::function<Tensor(const Tensor&, const Tensor&)>& in_place,
                     const std::function<Tensor(const Tensor&, const Tensor&)>& out_of_place, const Shape& other_shape,
                     const std::string& what) {
  Run a = run(in_place, other_shape), b = run(out_of_place, other_shape);
  EXPECT_EQ(a.y, b.y) << what;
  EXPECT_EQ(a.dx, b.dx) << what << " (gradient of the tensor changed in place)";
  EXPECT_EQ(a.dother, b.dother) << what << " (gradient of the operand)";
}

}  // namespace

TEST(InPlaceAutograd, NonLeafInPlaceOpsGiveTheOutOfPlaceGradients) {
  using F = std::function<Tensor(const Tensor&, const Tensor&)>;
  struct Case {
    const char* name;
    F in_place, out_of_place;
    Shape other_shape;
  };
  // x * 1.5 makes a non-leaf with history (mul saves x, not its output; after tanh, which saves its
  // output, the in-place op would be refused, as in PyTorch); each op then changes it in place. Operands of shape
  // [4] broadcast over the rows, so their gradients are summed.
  const std::vector<Case> cases = {
      {"add_ tensor",
       [](auto& x, auto& o) { return (x * 1.5).add_(o, 0.5); },
       [](auto& x, auto& o) { return (x * 1.5) + o * 0.5; },
       {4}},
      {"add_ scalar + o",
       [](auto& x, auto& o) { return (x * 1.5).add_(2.0).add_(o); },
       [](auto& x, auto& o) { return (x * 1.5) + 2.0 + o; },
       {3, 4}},
      {"sub_ tensor",
       [](auto& x, auto& o) { return (x * 1.5).sub_(o); },
       [](auto& x, auto& o) { return (x * 1.5) - o; },
       {3, 4}},
      {"mul_ tensor",
       [](auto& x, auto& o) { return (x * 1.5).mul_(o); },
       [](auto& x, auto& o) { return (x * 1.5) * o; },
       {4}},
      {"mul_ by itself",
       [](auto& x, auto&) {
         Tensor y = (x * 1.5);
         return y.mul_(x);
       },
       [](auto& x, auto&) { return (x * 1.5) * x; },
       {4}},
      {"mul_ scalar",
       [](auto& x, auto& o) { return (x * 1.5).mul_(3.0) + o; },
       [](auto& x, auto& o) { return (x * 1.5) * 3.0 + o; },
       {4}},
      {"div_ tensor",
       [](auto& x, auto& o) { return (x * 1.5).div_(o.exp()); },
       [](auto& x, auto& o) { return (x * 1.5) / o.exp(); },
       {4}},
      {"div_ scalar",
       [](auto& x, auto& o) { return (x * 1.5).div_(4.0) + o; },
       [](auto& x, auto& o) { return (x * 1.5) / 4.0 + o; },
       {4}},
      {"clamp_",
       [](auto& x, auto& o) { return (x * 2.0).clamp_(-0.5, 0.7) * o; },
       [](auto& x, auto& o) { return (x * 2.0).clamp(-0.5, 0.7) * o; },
       {4}},
      {"fill_",
       [](auto& x, auto& o) { return (x * 2.0).fill_(1.5) * o + x; },
       [](auto& x, auto& o) {
         return full({3, 4}, 1.5, {.dtype = DType::F64}) * o + x;
       },
       {4}},
      {"copy_ (broadcast)",
       [](auto& x, auto& o) { return (x * 2.0).copy_(o.exp()) + x; },
       [](auto& x, auto& o) {
         return o.exp().expand({3, 4}) + x;
       },
       {4}},
      {"chained",
       [](auto& x, auto& o) { return (x * 1.5).mul_(o).add_(x).clamp_(-0.4, std::nullopt).div_(2.0); },
       [](auto& x, auto& o) { return (((x * 1.5) * o + x).clamp(-0.4, std::nullopt)) / 2.0; },
       {4}},
  };
  for (const Case& c : cases) expect_same_run(c.in_place, c.out_of_place, c.other_shape, c.name);
}

TEST(InPlaceAutograd, ATensorWithoutHistoryTakesOneFromItsOperand) {
  // A buffer made with zeros() does not require grad; copying or adding a tensor that does gives
  // it history, as in PyTorch.
  Tensor x = leaf_input({2, 3}, 4);
  Tensor buf = zeros({2, 3}, {.dtype = DType::F64});
  buf.copy_(x * 3.0);
  buf.add_(x);
  EXPECT_TRUE(buf.requires_grad());
  buf.sum().backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(6, 4.0));
}

TEST(InPlaceAutograd, ChangingAValueAnEarlierOpSavedFailsInBackward) {
  Tensor x = leaf_input({5}, 5);
  Tensor y = x.exp();  // exp's backward reads its output
  Tensor z = y * 2.0;
  y.mul_(3.0);  // allowed: y has history; but exp's saved output is now different
  expect_error([&] { (z + y).sum().backward(); }, "modified by an in-place operation");
}

TEST(InPlaceAutograd, InPlaceOnAViewIsRefused) {
  Tensor x = leaf_input({3, 4}, 6);
  Tensor y = x * 2.0;
  expect_error([&] { y.select(0, 1).mul_(3.0); }, "mul_: in-place update of a view");
  expect_error([&] { y.narrow(1, 0, 2).zero_(); }, "fill_: in-place update of a view");
  // A view of a tensor that needs no gradient, given one by its operand, is refused as well:
  // the buffer it views would silently miss the gradient.
  Tensor buf = zeros({3, 4}, {.dtype = DType::F64});
  expect_error([&] { buf.select(0, 0).copy_(x.select(0, 0)); }, "copy_: in-place update of a view");
  // Outside grad mode views change freely.
  NoGradGuard ng;
  y.select(0, 1).mul_(3.0);
}

TEST(InPlaceAutograd, AViewOfATensorChangedInPlaceIsRefusedWhenUsed) {
  Tensor x = leaf_input({3, 4}, 7);
  Tensor y = x * 2.0;
  Tensor row = y.select(0, 0);
  y.add_(1.0);  // rebases y; row's history still describes the old y
  expect_error([&] { (row * 2.0).sum(); }, "take the view again after the in-place update");
  Tensor fresh_row = y.select(0, 0);  // taken after the update: fine
  (fresh_row * 2.0).sum().backward();
  std::vector<double> want(12, 0.0);
  for (int j = 0; j < 4; ++j) want[j] = 4.0;
  EXPECT_EQ(values(x.grad()), want);
}

TEST(InPlaceAutograd, InPlaceOnADetachedTensorDoesNotTouchTheGraph) {
  Tensor x = leaf_input({4}, 8);
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  d.mul_(0.0);  // shares y's bytes (mul saved nothing of y), records nothing
  EXPECT_FALSE(d.requires_grad());
  y.sum().backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(4, 2.0));
}
