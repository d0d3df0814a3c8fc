// The autocast guard.
#include "brisk/amp/autocast.h"

#include <string>

#include "brisk/util/error.h"

namespace brisk::amp {

Autocast::Autocast(DType dtype, bool enabled, bool cache_enabled) : prev_(autocast_state()) {
  BRISK_CHECK(dtype == DType::F16 || dtype == DType::BF16, "Autocast: dtype must be f16 or bf16, got ",
              dtype_name(dtype));
  set_autocast_state({enabled, dtype, cache_enabled});
  autocast_enter();
}

Autocast::~Autocast() {
  set_autocast_state(prev_);
  autocast_exit();  // the outermost guard empties the weight cache
}

DType mixed_precision_dtype(MixedPrecision mp, bool* enabled) {
  *enabled = mp != MixedPrecision::No;
  return mp == MixedPrecision::FP16 ? DType::F16 : mp == MixedPrecision::BF16 ? DType::BF16 : DType::F32;
}

}  // namespace brisk::amp
