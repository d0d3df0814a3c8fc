// The autocast state ops consult (kept in core, below the ops; amp/ holds the guard users hold).
// While enabled on a thread, ops of the "lower precision" category (matmul, linear, conv,
// attention) run in the autocast dtype (f16 or bf16) and ops of the "fp32" category (softmax,
// log-softmax, losses, norms, reductions) run in f32. Parameters themselves stay f32.
#pragma once
#include "brisk/core/dtype.h"

namespace brisk {

enum class AutocastCategory : uint8_t { LowerPrecision, Fp32 };

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::BF16;
  // Whether a parameter's lower-precision cast may be reused instead of made again by each op:
  // the weight cache of the outermost region (brisk/core/autocast_cache.h) and the copies an
  // optimizer keeps (Optimizer::keep_autocast_copies). Off: every op casts afresh (PyTorch's
  // autocast(cache_enabled=False)).
  bool cache_enabled = true;
};

AutocastState autocast_state();
void set_autocast_state(AutocastState s);

// The autocast regions open on this thread, enabled or not (PyTorch's autocast nesting count):
// the guards enter one when made and leave it when destroyed; leaving the outermost empties the
// weight cache. Code that only swaps the state for a while (a checkpoint's recomputation) does not
// count as a region.
void autocast_enter();
void autocast_exit();
int autocast_nesting();

}  // namespace brisk
