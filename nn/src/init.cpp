// torch.nn.init formulas over brisk's seeded fills. Parameters may live on any device: values are
// drawn on the CPU and copied, so a seed gives the same model everywhere.
#include "brisk/nn/init.h"

#include <cmath>

#include "brisk/autograd/grad_mode.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"

namespace brisk::nn::init {

namespace {

// Runs fill(cpu_tensor) and copies the result into t (any device, any float dtype).
template <class Fill>
void fill_via_cpu(const Tensor& t, const char* op, Fill fill) {
  BRISK_CHECK(t.is_floating_point(), "init::", op, ": expected a floating-point tensor, got ", dtype_name(t.dtype()));
  NoGradGuard no_grad;
  DType work = t.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Tensor tmp = empty(t.sizes(), work, kCPU);
  fill(tmp);
  kernels::copy_(t, tmp);
  t.bump_version();
}

}  // namespace

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  BRISK_CHECK(t.dim() >= 2, "init: fan in and fan out need a tensor with at least 2 dims, got shape ", t.sizes());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nl, double param) {
  switch (nl) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::Relu:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyRelu:
      return std::sqrt(2.0 / (1 + param * param));
    case Nonlinearity::Selu:
      return 3.0 / 4.0;
  }
  BRISK_THROW("init::calculate_gain: unsupported nonlinearity ", static_cast<int>(nl));
}

void uniform_(const Tensor& t, double a, double b, Generator* gen) {
  fill_via_cpu(t, "uniform_", [&](const Tensor& c) { brisk::uniform_(c, a, b, gen); });
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  fill_via_cpu(t, "normal_", [&](const Tensor& c) { brisk::normal_(c, mean, std, gen); });
}

void constant_(const Tensor& t, double value) {
  NoGradGuard no_grad;
  kernels::fill_(t, value);
}
void zeros_(const Tensor& t) {
  constant_(t, 0.0);
}
void ones_(const Tensor& t) {
  constant_(t, 1.0);
}

void xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  auto [fin, fout] = fan_in_and_fan_out(t);
  double b = gain * std::sqrt(6.0 / static_cast<double>(fin + fout));
  init::uniform_(t, -b, b, gen);
}

void xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  auto [fin, fout] = fan_in_and_fan_out(t);
  init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fin + fout)), gen);
}

static double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  auto [fin, fout] = fan_in_and_fan_out(t);
  int64_t fan = mode == FanMode::FanIn ? fin : fout;
  BRISK_CHECK(fan > 0, "init::kaiming: fan is zero for shape ", t.sizes());
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}

void kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  double b = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  init::uniform_(t, -b, b, gen);
}

void kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  init::normal_(t, 0.0, kaiming_std(t, a, mode, nl), gen);
}

void trunc_normal_(const Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  BRISK_CHECK(a < b, "init::trunc_normal_: a (", a, ") must be less than b (", b, ")");
  fill_via_cpu(t, "trunc_normal_", [&](const Tensor& c) {
    brisk::normal_(c, mean, std, gen);
    // Resample out-of-range values deterministically from the same generator.
    std::vector<double> v = c.to_vector<double>();
    for (int round = 0; round < 64; ++round) {
      bool any = false;
      for (double& x : v) any |= x < a || x > b;
      if (!any) break;
      Tensor extra = empty({static_cast<int64_t>(v.size())}, DType::F64, kCPU);
      brisk::normal_(extra, mean, std, gen);
      std::vector<double> e = extra.to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i] < a || v[i] > b) v[i] = e[i];
    }
    for (double& x : v) x = std::min(std::max(x, a), b);
    kernels::copy_(c, from_vector<double>(v, c.sizes()));
  });
}

}  // namespace brisk::nn::init
