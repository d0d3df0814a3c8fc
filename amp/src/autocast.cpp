// The autocast guard.
#include "brisk/amp/autocast.h"

#include <string>

#include "brisk/core/error.h"

namespace brisk::amp {

Autocast::Autocast(DType dtype, bool enabled) : prev_(autocast_state()) {
  BRISK_CHECK(dtype == DType::F16 || dtype == DType::BF16, "Autocast: dtype must be f16 or bf16, got ",
              dtype_name(dtype));
  set_autocast_state({enabled, dtype});
}

Autocast::~Autocast() { set_autocast_state(prev_); }

DType mixed_precision_dtype(const std::string& mp, bool* enabled) {
  if (mp == "no") {
    *enabled = false;
    return DType::F32;
  }
  *enabled = true;
  if (mp == "fp16") return DType::F16;
  if (mp == "bf16") return DType::BF16;
  BRISK_THROW("mixed_precision must be one of no, fp16, bf16; got '", mp, "'");
}

}  // namespace brisk::amp
