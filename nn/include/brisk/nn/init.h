// Parameter initialisation with PyTorch's formulas (torch.nn.init), drawn from the seeded
// counter-based generator. All functions fill in place and record no graph.
#pragma once
#include <string>

#include "brisk/core/rng.h"
#include "brisk/core/tensor.h"

namespace brisk::nn::init {

// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (2-D or more).
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
// The recommended gain for a nonlinearity ("linear", "relu", "leaky_relu", "tanh", "sigmoid", "selu").
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

void uniform_(const Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// N(0, std) with std = gain * sqrt(2 / (fan_in + fan_out)).
void xavier_normal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// U(-b, b) with b = gain(nonlinearity, a) * sqrt(3 / fan); mode "fan_in" or "fan_out".
void kaiming_uniform_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                      const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
void kaiming_normal_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                     const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
// N(mean, std) truncated to [a, b] (resampled, as PyTorch's trunc_normal_ approximates).
void trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                   Generator* gen = nullptr);

}  // namespace brisk::nn::init
