// Test helper: a call must throw brisk::Error whose message contains a given fragment (the op's
// name, a shape, a value), so bad input is reported, not just rejected.
#pragma once
#include <gtest/gtest.h>

#include <brisk/util/error.h>

#include <functional>
#include <string>

namespace brisk::testing {

inline void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected a brisk::Error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// The message of the brisk::Error that `fn` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace brisk::testing
