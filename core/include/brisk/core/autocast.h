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
};

AutocastState autocast_state();
void set_autocast_state(AutocastState s);

}  // namespace brisk
