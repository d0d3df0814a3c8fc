// Optimizers' autocast copies: the 16-bit copy of each f32 parameter that AdamW writes in its fused
// update (other optimizers with one cast after theirs) is bit for bit the cast of the updated
// parameter, including NaN, infinities, subnormals, overflow and rounding ties, and leaves the
// update itself unchanged; copies are registered for autocast, made for f32 parameters only, and
// freed when turned off.
#include <gtest/gtest.h>

#include <brisk/autograd/autocast.h>
#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/optim.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#include "common/gradcheck.h"

using namespace brisk;

namespace {

std::vector<uint32_t> f32_bits(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// The raw 16-bit patterns of a contiguous f16 or bf16 CPU tensor.
std::vector<uint16_t> half_bits(const Tensor& t) {
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.data_ptr(), out.size() * sizeof(uint16_t));
  return out;
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// f32 values whose rounding to 16 bits is delicate: NaN (quiet, signalling, negative), +-inf,
// +-0, subnormals, the largest finite (overflows to inf in bf16 and f16), ties to even in bf16
// (0x3F808000 rounds down, 0x3F818000 up), just above a tie, f16's overflow and subnormal range.
std::vector<float> special_values() {
  std::vector<float> v = {std::numeric_limits<float>::quiet_NaN(),
                          from_bits(0x7F800001u),  // signalling NaN
                          from_bits(0xFFC00000u),  // negative NaN
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          0.0f,
                          -0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          from_bits(0x00400000u),  // a larger subnormal
                          -from_bits(0x007FFFFFu),
                          std::numeric_limits<float>::max(),
                          from_bits(0x3F808000u),
                          from_bits(0x3F818000u),
                          from_bits(0x3F808001u),
                          65504.0f,
                          65520.0f,
                          70000.0f,
                          6e-8f,
                          3e-5f,
                          -1.0009765625f};
  for (int i = 0; i < 100; ++i) v.push_back(std::ldexp(1.0f + static_cast<float>(i) / 97.0f, i % 40 - 20));
  return v;
}

}  // namespace

TEST(AutocastCopies, AdamStepWritesTheCastOfEachUpdatedParameter) {
  for (DType copy_dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(copy_dtype));
    // lr 0 and zero gradients keep the special values as they are (p - 0 * 0 / eps); random
    // values with a real update check the copy of a changed parameter.
    const std::vector<float> special = special_values();
    manual_seed(1);
    const std::vector<float> random = randn({70001}).to_vector<float>();
    for (const auto& [values, lr] : {std::pair{special, 0.0}, std::pair{random, 0.01}}) {
      Tensor p = from_vector<float>(values, {static_cast<int64_t>(values.size())});
      Tensor ref = p.clone();
      Tensor g = lr == 0 ? zeros(p.sizes()) : randn(p.sizes());
      Tensor copy = empty(p.sizes(), copy_dtype);
      std::vector<Tensor> m{zeros(p.sizes()), zeros(p.sizes())}, v{zeros(p.sizes()), zeros(p.sizes())};
      const kernels::AdamHyper h{lr, 0.9, 0.999, 1e-8, 0.0, true, false, false, 1};
      kernels::adam_step({p}, {g}, {m[0]}, {v[0]}, {}, h, {copy});
      kernels::adam_step({ref}, {g}, {m[1]}, {v[1]}, {}, h);
      EXPECT_EQ(f32_bits(p), f32_bits(ref)) << "writing the copy changed the update";
      EXPECT_EQ(half_bits(copy), half_bits(kernels::cast(p, copy_dtype)))
          << "the copy is not the cast kernel's rounding of the parameter";
    }
  }
}

TEST(AutocastCopies, AdamStepRefusesCopiesOfTheWrongShapeOrDtype) {
  Tensor p = zeros({4}), g = zeros({4}), m = zeros({4}), v = zeros({4});
  const kernels::AdamHyper h{0.1, 0.9, 0.999, 1e-8, 0.0, true, false, false, 1};
  EXPECT_THROW(kernels::adam_step({p}, {g}, {m}, {v}, {}, h, {empty({3}, DType::BF16)}), Error);
  EXPECT_THROW(kernels::adam_step({p}, {g}, {m}, {v}, {}, h, {empty({4}, DType::F32)}), Error);
  Tensor d = zeros({4}, {.dtype = DType::F64});
  EXPECT_THROW(kernels::adam_step({d}, {d}, {d.clone()}, {d.clone()}, {}, h, {empty({4}, DType::BF16)}), Error)
      << "copies are for f32 parameters";
}

TEST(AutocastCopies, OptimizersRegisterCurrentCopiesForAutocast) {
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which == 0 ? "AdamW (fused)" : "SGD (a cast after the update)");
    manual_seed(2);
    Tensor a = randn({5, 3}, {.requires_grad = true}), b = brisk::testing::leaf(from_vector<float>({1.0f, 2.0f}, {2}));
    Tensor c = zeros({2}, {.dtype = DType::F64, .requires_grad = true});  // f64: no copy
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0)
      opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{a, b, c}, optim::AdamWOptions{.lr = 0.1});
    else
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{a, b, c}, optim::SGDOptions{.lr = 0.1});
    opt->keep_autocast_copies(DType::BF16);
    EXPECT_FALSE(autograd::current_autocast_copy(a, DType::BF16).defined()) << "no copy before a step";
    a.set_grad(ones({5, 3}));  // b has no gradient: it skips the update but still gets a copy
    c.set_grad(ones({2}, {.dtype = DType::F64}));
    opt->step();
    for (const Tensor& p : {a, b}) {
      const Tensor copy = autograd::current_autocast_copy(p, DType::BF16);
      ASSERT_TRUE(copy.defined());
      EXPECT_EQ(half_bits(copy), half_bits(kernels::cast(p, DType::BF16)));
      EXPECT_FALSE(autograd::current_autocast_copy(p, DType::F16).defined()) << "a copy serves its own dtype only";
    }
    EXPECT_FALSE(autograd::current_autocast_copy(c, DType::BF16).defined());
    opt->keep_autocast_copies(DType::F32);
    EXPECT_FALSE(autograd::current_autocast_copy(a, DType::BF16).defined()) << "turned off, the copies are freed";
    EXPECT_THROW(opt->keep_autocast_copies(DType::F64), Error);
  }
}
