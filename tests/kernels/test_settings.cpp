// The process-wide kernel settings: deterministic algorithms are on by default, and the guard
// restores the previous value; the default thread count is read from OMP_NUM_THREADS exactly.
#include <gtest/gtest.h>

#include <brisk/kernels/settings.h>
#include <brisk/kernels/threads.h>
#include <brisk/util/error.h>

#include <cstdlib>
#include <string>

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

TEST(Settings, TheDefaultThreadCountComesFromOmpNumThreadsParsedExactly) {
  const int before = get_num_threads();
  ::setenv("OMP_NUM_THREADS", "3,1", 1);  // one count per nesting level: the first is ours
  set_num_threads(0);
  EXPECT_EQ(get_num_threads(), 3);
  for (const char* bad : {"0", "-2", "0x4", "1e1", "4 threads", "", ","}) {
    ::setenv("OMP_NUM_THREADS", bad, 1);
    if (*bad == '\0') {  // empty is unset: the number of cores
      set_num_threads(0);
      EXPECT_GE(get_num_threads(), 1);
      continue;
    }
    try {
      set_num_threads(0);
      ADD_FAILURE() << "OMP_NUM_THREADS='" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("OMP_NUM_THREADS"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("OMP_NUM_THREADS");
  set_num_threads(before);
}
