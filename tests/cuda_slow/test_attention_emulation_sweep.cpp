// The host emulation of the fused attention kernels (tests/cuda/attention_emulation.h) over a
// sweep of cases: every dtype, causal and not, T from 1 to 200 (ragged tiles, several tiles),
// head dims 32, 64, 80, 96 and 128, strided inputs, B * H > 1, more and fewer keys than queries.
// Each emulated block is 128 host threads, so this takes about a minute: label slow.
#include "cuda/attention_emulation_cases.h"

using namespace brisk;
using namespace brisk::testing::attention_emulation;

TEST(AttentionEmulationSweep, TensorCoreKernelsMatchTheCpu) {
  for (DType dt : {DType::BF16, DType::F16}) {
    for (bool causal : {true, false}) {
      run_case({dt, 1, 2, 130, 130, 64, causal, false});
      run_case({dt, 2, 1, 1, 1, 32, causal, false});
      run_case({dt, 1, 1, 63, 63, 80, causal, true});
    }
  }
  run_case({DType::BF16, 1, 1, 65, 65, 128, true, false});
  run_case({DType::F16, 1, 1, 70, 130, 64, false, true});    // more keys than queries
  run_case({DType::BF16, 1, 1, 130, 20, 32, false, false});  // fewer
  run_case({DType::F16, 1, 1, 200, 200, 96, true, false});   // four tiles, the last one ragged
}

TEST(AttentionEmulationSweep, F32KernelsMatchTheCpu) {
  for (bool causal : {true, false}) {
    run_case({DType::F32, 1, 2, 130, 130, 64, causal, false});
    run_case({DType::F32, 2, 1, 1, 1, 32, causal, false});
    run_case({DType::F32, 1, 1, 65, 65, 80, causal, true});
  }
  run_case({DType::F32, 1, 1, 70, 130, 128, false, false});
}
