// Test helper: this process's peak resident memory so far, in MiB (ctest runs each test in its
// own process, so it is the test's), for the tests that bound what a reader may allocate.
#pragma once
#include <sys/resource.h>

namespace brisk::testing {

inline long peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

}  // namespace brisk::testing
