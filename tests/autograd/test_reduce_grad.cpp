// Gradients of the reductions, cumsum, topk and softmax: float64 finite-difference checks in
// contiguous and strided layouts (keepdim on and off), plus hand-computed tie and zero cases.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include "common/gradcheck.h"
#include "common/random.h"

using namespace brisk;
using brisk::testing::expect_gradcheck_layouts;
using brisk::testing::seeded_randn;

namespace {

using Fn = std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)>;

// Gradchecks fn over a 3-D input for several dim sets, keepdim off and on.
void gradcheck_dims(const char* name, const Fn& fn, const Tensor& x) {
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {1}, {0, 2}, {-1}}) {
    for (bool keepdim : {false, true}) {
      expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return fn(v[0], dims, keepdim); }, {x},
                               std::string(name) + " dims " + detail::str_cat(dims) + (keepdim ? " keepdim" : ""));
    }
  }
}

std::vector<double> grad_of(const Tensor& x, const std::function<Tensor(const Tensor&)>& fn) {
  Tensor leaf = x.detach().clone();
  leaf.requires_grad_();
  fn(leaf).sum().backward();
  return leaf.grad().to_vector<double>();
}

}  // namespace

TEST(ReduceGrad, SumAndMean) {
  gradcheck_dims(
      "sum", [](const Tensor& x, const auto& d, bool k) { return sum(x, d, k); }, seeded_randn({2, 3, 4}, 1));
  gradcheck_dims(
      "mean", [](const Tensor& x, const auto& d, bool k) { return mean(x, d, k); }, seeded_randn({2, 3, 4}, 2));
}

TEST(ReduceGrad, Prod) {
  gradcheck_dims(
      "prod", [](const Tensor& x, const auto& d, bool k) { return prod(x, d, k); }, seeded_randn({2, 3, 4}, 3));
}

TEST(ReduceGrad, ProdWithZerosGetsTheProductOfTheOthers) {
  // One zero: only the zero gets a gradient (the product of the rest); two zeros: none does.
  EXPECT_EQ(grad_of(tensor<double>({2, 0, 3}), [](const Tensor& x) { return prod(x); }),
            (std::vector<double>{0, 6, 0}));
  EXPECT_EQ(grad_of(tensor<double>({2, 0, 0}), [](const Tensor& x) { return prod(x); }),
            (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_of(tensor<double>({2, 4, 3}), [](const Tensor& x) { return prod(x); }),
            (std::vector<double>{12, 6, 8}));
}

TEST(ReduceGrad, AmaxAndAmin) {
  gradcheck_dims(
      "amax", [](const Tensor& x, const auto& d, bool k) { return amax(x, d, k); }, seeded_randn({2, 3, 4}, 4));
  gradcheck_dims(
      "amin", [](const Tensor& x, const auto& d, bool k) { return amin(x, d, k); }, seeded_randn({2, 3, 4}, 5));
}

TEST(ReduceGrad, AmaxSplitsTheGradientEvenlyAmongTies) {
  EXPECT_EQ(grad_of(tensor<double>({1, 3, 3, 2}), [](const Tensor& x) { return amax(x); }),
            (std::vector<double>{0, 0.5, 0.5, 0}));
  EXPECT_EQ(grad_of(tensor<double>({1, 3, 3, 2}), [](const Tensor& x) { return max(x); }),
            (std::vector<double>{0, 0.5, 0.5, 0}));
  EXPECT_EQ(grad_of(tensor<double>({1, 1, 3, 1}), [](const Tensor& x) { return min(x); }),
            (std::vector<double>{1.0 / 3, 1.0 / 3, 0, 1.0 / 3}));
}

TEST(ReduceGrad, MaxAndMinAlongADim) {
  Tensor x = seeded_randn({3, 4, 5}, 6);
  for (int64_t dim : {0, 1, -1})
    for (bool keepdim : {false, true}) {
      const std::string what = "dim " + std::to_string(dim) + (keepdim ? " keepdim" : "");
      expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return max(v[0], dim, keepdim).values; }, {x},
                               "max " + what);
      expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return min(v[0], dim, keepdim).values; }, {x},
                               "min " + what);
    }
}

TEST(ReduceGrad, MaxAlongADimSendsTheGradientToTheReturnedIndexOnly) {
  Tensor x = from_vector<double>({1, 5, 5, 2, 7, 0, 7, 7}, {2, 4});
  auto g = grad_of(x, [](const Tensor& t) { return max(t, 1).values; });
  EXPECT_EQ(g, (std::vector<double>{0, 1, 0, 0, 1, 0, 0, 0}));
  auto [v, i] = max(x, 1);
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_FALSE(i.requires_grad());
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), i.to_vector<int64_t>());
}

TEST(ReduceGrad, VarAndStd) {
  for (int64_t c : {0, 1}) {
    gradcheck_dims(
        c ? "var" : "var correction 0", [c](const Tensor& x, const auto& d, bool k) { return var(x, d, c, k); },
        seeded_randn({2, 3, 4}, 7));
    gradcheck_dims(
        c ? "std" : "std correction 0",
        [c](const Tensor& x, const auto& d, bool k) { return brisk::std_dev(x, d, c, k); }, seeded_randn({2, 3, 4}, 8));
  }
}

TEST(ReduceGrad, StdOfAConstantGroupHasZeroGradient) {
  EXPECT_EQ(grad_of(tensor<double>({2, 2, 2}), [](const Tensor& x) { return std_dev(x); }),
            (std::vector<double>{0, 0, 0}));
}

TEST(ReduceGrad, Logsumexp) {
  gradcheck_dims(
      "logsumexp", [](const Tensor& x, const auto& d, bool k) { return logsumexp(x, d, k); },
      seeded_randn({2, 3, 4}, 9));
}

TEST(ReduceGrad, Cumsum) {
  Tensor x = seeded_randn({3, 4, 5}, 10);
  for (int64_t dim : {0, 1, -1})
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return cumsum(v[0], dim); }, {x},
                             "cumsum dim " + std::to_string(dim));
}

TEST(ReduceGrad, Topk) {
  Tensor x = seeded_randn({3, 4, 5}, 11);
  for (int64_t dim : {0, -1})
    for (bool largest : {true, false})
      for (bool sorted : {true, false})
        expect_gradcheck_layouts(
            [&](const std::vector<Tensor>& v) { return topk(v[0], 2, dim, largest, sorted).values; }, {x},
            "topk dim " + std::to_string(dim) + (largest ? " largest" : " smallest") +
                (sorted ? " sorted" : " unsorted"));
}

TEST(ReduceGrad, SoftmaxAndLogSoftmax) {
  Tensor x = seeded_randn({3, 4, 5}, 12);
  for (int64_t dim : {0, 1, -1}) {
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return softmax(v[0], dim); }, {x},
                             "softmax dim " + std::to_string(dim));
    expect_gradcheck_layouts([&](const std::vector<Tensor>& v) { return log_softmax(v[0], dim); }, {x},
                             "log_softmax dim " + std::to_string(dim));
  }
}

TEST(ReduceGrad, ArgmaxAndIntegerResultsCarryNoGradient) {
  Tensor x = seeded_randn({2, 3}, 13);
  x.requires_grad_();
  EXPECT_FALSE(argmax(x).requires_grad());
  EXPECT_FALSE(topk(x, 2).indices.requires_grad());
  EXPECT_TRUE(topk(x, 2).values.requires_grad());
}

TEST(ReduceGrad, GradientsOfF32InputsAreF32) {
  Tensor x = randn({4, 6});
  x.requires_grad_();
  (softmax(x, 1) * log_softmax(x, 0)).sum().backward();
  EXPECT_EQ(x.grad().dtype(), DType::F32);
  EXPECT_EQ(x.grad().sizes(), (Shape{4, 6}));
}
