// Whether this test binary runs under AddressSanitizer. Tests that measure the process's memory
// (peak RSS) skip there: ASan's shadow memory, redzones and quarantine of freed blocks inflate
// RSS by a factor that depends on the allocation pattern, so the bound would test ASan, not
// brisk. The same tests run in the normal build.
#pragma once

namespace brisk::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace brisk::testing

// Skips the current test under AddressSanitizer (see above).
#define BRISK_SKIP_MEMORY_MEASUREMENT_UNDER_ASAN()                                                       \
  do {                                                                                                   \
    if (::brisk::testing::kAddressSanitizer)                                                             \
      GTEST_SKIP() << "measures peak RSS, which AddressSanitizer inflates; checked in the normal build"; \
  } while (0)
