// Parameter initialisation with PyTorch's formulas (torch.nn.init), drawn from the seeded
// counter-based generator. All functions fill in place and record no graph.
#pragma once
#include <cstdint>
#include <utility>

#include "brisk/core/enums.h"
#include "brisk/core/rng.h"
#include "brisk/core/tensor.h"

namespace brisk::nn::init {

// The nonlinearity a layer's output goes through, for its gain (PyTorch's words: "linear",
// "sigmoid", "tanh", "relu", "leaky_relu", "selu"; "conv1d" ... "conv_transpose3d" mean linear).
enum class Nonlinearity : uint8_t { Linear, Sigmoid, Tanh, Relu, LeakyRelu, Selu };
// Which fan Kaiming initialisation keeps the variance of: the forward pass's (FanIn) or the
// backward pass's (FanOut).
enum class FanMode : uint8_t { FanIn, FanOut };

// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (2-D or more).
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
// The recommended gain for a nonlinearity (`param`: leaky_relu's negative slope).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

void uniform_(const Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// N(0, std) with std = gain * sqrt(2 / (fan_in + fan_out)).
void xavier_normal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// U(-b, b) with b = gain(nonlinearity, a) * sqrt(3 / fan), fan as `mode` says.
void kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                      Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, Generator* gen = nullptr);
void kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                     Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, Generator* gen = nullptr);
// N(mean, std) truncated to [a, b] (resampled, as PyTorch's trunc_normal_ approximates).
void trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                   Generator* gen = nullptr);

}  // namespace brisk::nn::init

namespace brisk {
template <>
struct EnumNames<nn::init::Nonlinearity> {
  using N = nn::init::Nonlinearity;
  static constexpr std::array<std::pair<std::string_view, N>, 12> values{{{"linear", N::Linear},
                                                                          {"sigmoid", N::Sigmoid},
                                                                          {"tanh", N::Tanh},
                                                                          {"relu", N::Relu},
                                                                          {"leaky_relu", N::LeakyRelu},
                                                                          {"selu", N::Selu},
                                                                          {"conv1d", N::Linear},
                                                                          {"conv2d", N::Linear},
                                                                          {"conv3d", N::Linear},
                                                                          {"conv_transpose1d", N::Linear},
                                                                          {"conv_transpose2d", N::Linear},
                                                                          {"conv_transpose3d", N::Linear}}};
};
template <>
struct EnumNames<nn::init::FanMode> {
  static constexpr std::array<std::pair<std::string_view, nn::init::FanMode>, 2> values{
      {{"fan_in", nn::init::FanMode::FanIn}, {"fan_out", nn::init::FanMode::FanOut}}};
};
}  // namespace brisk
