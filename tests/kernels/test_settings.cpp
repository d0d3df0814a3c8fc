// The process-wide kernel settings: deterministic algorithms are on by default, and the guard
// restores the previous value.
#include <gtest/gtest.h>

#include <brisk/kernels/settings.h>

using namespace brisk;

TEST(Settings, DeterministicIsOnByDefaultAndTheGuardRestoresIt) {
  EXPECT_TRUE(kernels::deterministic());
  {
    kernels::DeterministicGuard off(false);
    EXPECT_FALSE(kernels::deterministic());
    {
      kernels::DeterministicGuard on(true);
      EXPECT_TRUE(kernels::deterministic());
    }
    EXPECT_FALSE(kernels::deterministic());
  }
  EXPECT_TRUE(kernels::deterministic());
  kernels::set_deterministic(false);
  EXPECT_FALSE(kernels::deterministic());
  kernels::set_deterministic(true);
}
