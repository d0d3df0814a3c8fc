// nn::init: PyTorch's gains and Kaiming bounds, and the words users spell the choices with.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <algorithm>
#include <cmath>

#include "common/errors.h"

using namespace brisk;
using brisk::testing::expect_error;
namespace init = brisk::nn::init;

TEST(Init, GainsAreTorchs) {
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Linear), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Sigmoid), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyRelu, 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Selu), 0.75);
}

TEST(Init, ChoicesParseFromTorchsWords) {
  EXPECT_EQ(parse_enum<init::Nonlinearity>("leaky_relu", "nonlinearity"), init::Nonlinearity::LeakyRelu);
  EXPECT_EQ(parse_enum<init::Nonlinearity>("conv2d", "nonlinearity"), init::Nonlinearity::Linear);
  EXPECT_EQ(enum_name(init::Nonlinearity::Linear), "linear");
  EXPECT_EQ(parse_enum<init::FanMode>("fan_out", "mode"), init::FanMode::FanOut);
  expect_error([] { (void)parse_enum<init::FanMode>("fan_avg", "kaiming: mode"); },
               "kaiming: mode: 'fan_avg' is not valid; expected one of: fan_in, fan_out");
}

// U(-b, b) with b = gain * sqrt(3 / fan): the draws stay inside and come close to the bound.
TEST(Init, KaimingUniformUsesTheChosenFan) {
  for (init::FanMode mode : {init::FanMode::FanIn, init::FanMode::FanOut}) {
    Tensor w = empty({64, 32});
    Generator gen(3);
    init::kaiming_uniform_(w, 0.0, mode, init::Nonlinearity::Relu, &gen);
    const double fan = mode == init::FanMode::FanIn ? 32 : 64;
    const double bound = std::sqrt(2.0) * std::sqrt(3.0 / fan);
    double most = 0;
    for (float v : w.to_vector<float>()) most = std::max(most, std::abs(static_cast<double>(v)));
    EXPECT_LE(most, bound * (1 + 1e-6)) << enum_name(mode);
    EXPECT_GT(most, 0.95 * bound) << enum_name(mode);
  }
}
