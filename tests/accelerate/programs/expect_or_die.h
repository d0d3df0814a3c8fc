// EXPECT_OR_DIE for the multi-process worker programs: on a failed check, print the rank, the
// line, the condition and a message, then exit 1 (the test harness fails the job when any rank
// exits non-zero). Set rank_for_messages once the rank is known.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace brisk::testing {
inline int rank_for_messages = 0;
}  // namespace brisk::testing

#define EXPECT_OR_DIE(cond, ...)                                                                                   \
  do {                                                                                                             \
    if (!(cond)) {                                                                                                 \
      std::ostringstream os_;                                                                                      \
      os_ << __VA_ARGS__;                                                                                          \
      std::fprintf(stderr, "FAIL rank %d line %d: %s: %s\n", ::brisk::testing::rank_for_messages, __LINE__, #cond, \
                   os_.str().c_str());                                                                             \
      std::fflush(stderr);                                                                                         \
      std::exit(1);                                                                                                \
    }                                                                                                              \
  } while (0)
