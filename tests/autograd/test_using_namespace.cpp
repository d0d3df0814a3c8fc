// `using namespace brisk;` beside std:: names, as libtorch users write `using namespace torch;`:
// this file compiles only if nothing brisk exports at namespace scope clashes with std (the free
// standard deviation is std_dev, so an unqualified call works). Also the small accessors libtorch
// code leans on: item<T>(), to_vector<T>(), numel(), dim(), size(-1), and printing.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace brisk;

TEST(UsingNamespaceBrisk, CompilesBesideStdNames) {
  std::vector<int64_t> dims = {0};
  std::map<std::string, double> stats;
  std::string name = "x";
  Tensor x = from_vector<double>({1.0, -2.0, 3.0, 5.0}, {2, 2});
  // Unqualified brisk calls next to std:: ones.
  stats["std_dev"] = std_dev(x).item<double>();
  stats["std method"] = x.std().item<double>();
  stats["std qualified"] = brisk::std(x).item<double>();  // the old spelling still works qualified
  stats["max"] = max(x).item<double>();
  stats["min"] = min(x).item<double>();
  stats["abs sum"] = abs(x).sum().item<double>();
  stats["std::max"] = std::max(1.0, 2.0);
  stats["std::abs"] = std::abs(-3.0);
  stats["var dim"] = var(x, dims).sum().item<double>();
  // Sample std of {1, -2, 3, 5}: mean 1.75, squared deviations sum 26.75, / 3.
  EXPECT_NEAR(stats["std_dev"], std::sqrt(26.75 / 3), 1e-12);
  EXPECT_EQ(stats["std method"], stats["std_dev"]);
  EXPECT_EQ(stats["std qualified"], stats["std_dev"]);
  EXPECT_EQ(stats["max"], 5.0);
  EXPECT_EQ(stats["min"], -2.0);
  EXPECT_EQ(stats["abs sum"], 11.0);
  EXPECT_EQ(stats["std::max"], 2.0);
  EXPECT_EQ(stats["std::abs"], 3.0);
  // var over dim 0: columns {1, 3} and {-2, 5}: 2 + 24.5.
  EXPECT_NEAR(stats["var dim"], 26.5, 1e-12);
  EXPECT_EQ(name, "x");
}

TEST(UsingNamespaceBrisk, AccessorsLibtorchCodeUses) {
  Tensor x = arange(0.0, 6.0, 1.0, {.dtype = DType::F32}).view({2, 3});
  EXPECT_EQ(x.numel(), 6);
  EXPECT_EQ(x.dim(), 2);
  EXPECT_EQ(x.size(-1), 3);
  EXPECT_EQ(x.size(-2), 2);
  EXPECT_EQ(x.size(1), 3);
  EXPECT_THROW((void)x.size(2), Error);
  EXPECT_THROW((void)x.size(-3), Error);
  EXPECT_EQ(x.sum().item<float>(), 15.0f);
  EXPECT_EQ(x.sum().item<int64_t>(), 15);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(x.t().to_vector<int>(), (std::vector<int>{0, 3, 1, 4, 2, 5}));  // logical order, converted
}

TEST(UsingNamespaceBrisk, PrintingShowsDTypeDeviceAndShape) {
  std::ostringstream os;
  os << from_vector<double>({1.5, 2.0}, {1, 2});
  const std::string s = os.str();
  EXPECT_NE(s.find("shape=[1, 2]"), std::string::npos) << s;
  EXPECT_NE(s.find("dtype=f64"), std::string::npos) << s;
  EXPECT_NE(s.find("device=cpu"), std::string::npos) << s;
  EXPECT_NE(s.find("1.5"), std::string::npos) << s;
}
