// Test helpers: a tensor's values as float64 (any dtype, any layout), and an element-by-element
// comparison of two such lists within a tolerance that names the element that differs.
#pragma once
#include <gtest/gtest.h>

#include <brisk/core/tensor.h>

#include <vector>

namespace brisk::testing {

inline std::vector<double> values(const Tensor& t) {
  return t.to(DType::F64).contiguous().to_vector<double>();
}

inline void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

}  // namespace brisk::testing
