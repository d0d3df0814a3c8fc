// The autocast guard: inside its scope, matmul, linear, conv and attention run in f16 or bf16 and
// softmax, log-softmax, losses, norms and reductions in f32; parameters stay f32. The policy is
// the same on every device (CPU and CUDA tensors alike): the guard sets a thread-local state that
// each op consults when it runs; on a GPU the casts it implies are device kernels on the current
// stream, with no host synchronisation.
//
//   { amp::Autocast ac(DType::BF16); loss = nn::cross_entropy(net(x), y); }
//   loss.backward();   // outside the guard, as in PyTorch
//
// As PyTorch's, the outermost guard keeps a weight cache: a parameter's cast is made once and
// reused by every op until that guard ends, and an optimizer's autocast copies
// (Optimizer::keep_autocast_copies) are used instead of casting at all (docs/tour/04-mixed-precision.md).
// cache_enabled = false makes every op cast afresh.
#pragma once
#include <string>

#include "brisk/core/autocast.h"
#include "brisk/core/enums.h"

namespace brisk::amp {

class Autocast {
 public:
  explicit Autocast(DType dtype = DType::BF16, bool enabled = true, bool cache_enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  AutocastState prev_;
};

// No -> autocast off, FP16 -> F16, BF16 -> BF16 (*enabled says whether autocast is on).
DType mixed_precision_dtype(MixedPrecision mixed_precision, bool* enabled);

}  // namespace brisk::amp
