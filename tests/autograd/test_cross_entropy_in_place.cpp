// cross_entropy's backward writes the gradient over the logits when nothing else can read them
// (docs/how-brisk-works.md, "Reusing memory nobody else can see"): the same gradient bits as the
// allocating path, no second logits-sized buffer at the peak, and the logits left alone whenever
// the user holds them, another op saved them, or the graph is kept for another backward.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <string>
#include <vector>

using namespace brisk;

namespace {

// f32 values of any float tensor (exact for 16-bit ones): equal vectors are equal bits.
std::vector<float> ce_values(const Tensor& t) {
  return t.contiguous().to(DType::F32).to_vector<float>();
}

const Tensor kCeTargets = from_vector<int64_t>({3, -100, 36, 0, 5, 17, 36, 1}, {8});

// x * 2 is exact, and its backward doubles the gradient exactly: x's gradient is the logits' twice.
Tensor ce_loss_of_temporary(const Tensor& x, const CrossEntropyOptions& o) {
  return sum(cross_entropy(x * 2.0, kCeTargets, o));
}

}  // namespace

TEST(CrossEntropyInPlace, GradientOverTheLogitsIsTheAllocatingPathBitForBit) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      for (double ls : {0.0, 0.1}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::string(enum_name(red)) + " smoothing " +
                     std::to_string(ls));
        manual_seed(5);
        const Tensor x = randn({8, 37}).to(dt).detach().requires_grad_(true);
        const CrossEntropyOptions o{.ignore_index = -100, .label_smoothing = ls, .reduction = red};
        // 16-bit logits as a classifier meets them: under autocast (the loss in f32).
        amp::Autocast ac(dt == DType::F32 ? DType::BF16 : dt, dt != DType::F32);
        ce_loss_of_temporary(x, o).backward();
        const std::vector<float> in_place = ce_values(x.grad());
        x.set_grad(Tensor());
        const Tensor z = x * 2.0;  // held by the user: the allocating path
        const std::vector<float> z_before = ce_values(z);
        sum(cross_entropy(z, kCeTargets, o)).backward();
        EXPECT_EQ(in_place, ce_values(x.grad()));
        EXPECT_EQ(ce_values(z), z_before) << "the user's logits are left alone";
      }
    }
  }
}

// A classifier's step over 256 x 4,099 f32 logits from a small product: with the logits a
// temporary, the backward's peak holds one logits-sized buffer (the logits, then their gradient
// in their place); with the user holding them, two.
TEST(CrossEntropyInPlace, TheBackwardNeedsNoSecondLogitsSizedBuffer) {
  const int64_t rows = 256, classes = 4099, k = 8;
  const int64_t logits_bytes = rows * classes * 4;
  manual_seed(6);
  const Tensor h = randn({rows, k});
  const Tensor w = randn({k, classes}).requires_grad_(true);
  const Tensor t = randint(0, classes, {rows});
  auto backward_peak = [&](bool hold) {
    w.set_grad(Tensor());
    Tensor held = hold ? matmul(h, w) : Tensor();
    Tensor loss = cross_entropy(hold ? held : matmul(h, w), t);
    const int64_t before = memory_stats().total_current;
    reset_peak_memory_stats();
    loss.backward();
    return memory_stats().total_peak - before;
  };
  const int64_t in_place = backward_peak(false);
  const std::vector<float> grad_in_place = ce_values(w.grad());
  const int64_t held = backward_peak(true);
  EXPECT_LT(in_place, logits_bytes / 2) << "peak extra bytes in backward, logits a temporary";
  EXPECT_GE(held, logits_bytes) << "peak extra bytes in backward, logits held: the gradient's own buffer";
  EXPECT_EQ(grad_in_place, ce_values(w.grad()));
}

// An op recorded before cross_entropy saved the logits for its own backward, which runs after
// cross_entropy's: the logits must still be there (else its gradient is wrong, or refused as
// modified in place).
TEST(CrossEntropyInPlace, LogitsAnotherOpSavedAreLeftAlone) {
  manual_seed(7);
  const Tensor x = randn({8, 37}).requires_grad_(true);
  auto loss_with_penalty = [&](bool hold, Tensor* keep) {
    Tensor z = x * 2.0;
    Tensor penalty = sum(square(z)) * 1e-3;  // square saves z
    if (hold) *keep = z;
    return cross_entropy(z, kCeTargets) + penalty;
  };
  Tensor none;
  loss_with_penalty(false, &none).backward();
  const std::vector<float> got = ce_values(x.grad());
  x.set_grad(Tensor());
  Tensor kept;
  loss_with_penalty(true, &kept).backward();
  EXPECT_EQ(got, ce_values(x.grad()));
}

// retain_graph keeps the closure for another run, which reads the logits again.
TEST(CrossEntropyInPlace, RetainGraphKeepsTheLogitsForTheNextBackward) {
  manual_seed(8);
  const Tensor x = randn({8, 37}).requires_grad_(true);
  Tensor loss = ce_loss_of_temporary(x, {});
  loss.backward(Tensor(), true);
  const std::vector<float> first = ce_values(x.grad());
  x.set_grad(Tensor());
  loss.backward();
  EXPECT_EQ(ce_values(x.grad()), first);
}
