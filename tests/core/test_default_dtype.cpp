// The default dtype (set_default_dtype / get_default_dtype) and TensorOptions in the factories.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;

namespace {
// Restores the process-wide default when a test ends.
struct DefaultDTypeGuard {
  DType saved = get_default_dtype();
  ~DefaultDTypeGuard() { set_default_dtype(saved); }
};
}  // namespace

TEST(DefaultDType, IsF32AndFactoriesUseIt) {
  DefaultDTypeGuard guard;
  EXPECT_EQ(get_default_dtype(), DType::F32);
  EXPECT_EQ(zeros({2}).dtype(), DType::F32);
  set_default_dtype(DType::F64);
  EXPECT_EQ(get_default_dtype(), DType::F64);
  EXPECT_EQ(empty({2}).dtype(), DType::F64);
  EXPECT_EQ(zeros({2}).dtype(), DType::F64);
  EXPECT_EQ(ones({2}).dtype(), DType::F64);
  EXPECT_EQ(full({2}, 3.0).dtype(), DType::F64);
  EXPECT_EQ(rand({2}).dtype(), DType::F64);
  EXPECT_EQ(randn({2}).dtype(), DType::F64);
  EXPECT_EQ(linspace(0.0, 1.0, 3).dtype(), DType::F64);
  EXPECT_EQ(zeros({2}, {.device = kCPU}).dtype(), DType::F64);  // dtype left out: the default
  EXPECT_EQ(nn::Linear(3, 2).weight.dtype(), DType::F64);       // module parameters too
  // An explicit dtype, integer factories and typed literals are not affected.
  EXPECT_EQ(zeros({2}, {.dtype = DType::F16}).dtype(), DType::F16);
  EXPECT_EQ(arange(3).dtype(), DType::I64);
  EXPECT_EQ(randint(0, 3, {2}).dtype(), DType::I64);
  EXPECT_EQ(tensor<float>({1.0f}).dtype(), DType::F32);
  set_default_dtype(DType::BF16);
  EXPECT_EQ(zeros({1}).dtype(), DType::BF16);
}

TEST(DefaultDType, MustBeFloating) {
  DefaultDTypeGuard guard;
  expect_error([] { set_default_dtype(DType::I64); }, "set_default_dtype: the default dtype must be a floating type");
  EXPECT_EQ(get_default_dtype(), DType::F32);  // unchanged
}

TEST(TensorOptions, RequiresGradMakesALeaf) {
  Tensor w = randn({3, 2}, {.dtype = DType::F64, .requires_grad = true});
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.dtype(), DType::F64);
  (w * 2.0).sum().backward();
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(6, 2.0));
  EXPECT_TRUE(zeros({2}, {.requires_grad = true}).requires_grad());
  EXPECT_TRUE(ones({2}, {.requires_grad = true}).requires_grad());
  EXPECT_TRUE(full({2}, 1.0, {.requires_grad = true}).requires_grad());
  EXPECT_TRUE(rand({2}, {.requires_grad = true}).requires_grad());
  EXPECT_TRUE(linspace(0.0, 1.0, 4, {.requires_grad = true}).requires_grad());
  EXPECT_TRUE(arange(0.0, 2.0, 1.0, {.dtype = DType::F32, .requires_grad = true}).requires_grad());
  EXPECT_TRUE(empty({2}, TensorOptions{.requires_grad = true}).requires_grad());
  EXPECT_FALSE(zeros({2}).requires_grad());
  // Only floating tensors can require grad, as with requires_grad_().
  expect_error([] { (void)arange(3, {.dtype = DType::I64, .requires_grad = true}); }, "requires_grad_");
}
