// Factories. Values are made on the CPU (random ones from the counter-based generator, one
// Philox block per element) and copied when another device is asked for.
#include "brisk/kernels/factory.h"

#include <cmath>

#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"

namespace brisk {

namespace {

Tensor on_device(Tensor cpu_tensor, Device d) {
  return d.is_cpu() ? cpu_tensor : kernels::to_device(cpu_tensor, d);
}

// Fills a contiguous CPU tensor with f(i) for element i, converted to its dtype.
template <class F>
void fill_indexed(const Tensor& t, const char* op, F f) {
  kernels::visit_all(t.dtype(), t.device(), op, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<acc_t<T>>(f(i)));
  });
}

Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }

}  // namespace

Tensor full(const Shape& sizes, double value, TensorOptions o) {
  Tensor t = empty(sizes, o.dtype, kCPU);
  kernels::fill_(t, value);
  return on_device(t, o.device);
}
Tensor zeros(const Shape& sizes, TensorOptions o) { return full(sizes, 0.0, o); }
Tensor ones(const Shape& sizes, TensorOptions o) { return full(sizes, 1.0, o); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, double value) { return full(t.sizes(), value, {t.dtype(), t.device()}); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype(), t.device()); }

Tensor arange(double start, double end, double step, TensorOptions o) {
  BRISK_CHECK(step != 0, "arange: step must be nonzero");
  BRISK_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: range [", start, ", ", end,
              ") is inconsistent with step ", step);
  auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = empty({n}, o.dtype, kCPU);
  fill_indexed(t, "arange", [=](int64_t i) { return start + static_cast<double>(i) * step; });
  return on_device(t, o.device);
}

Tensor arange(int64_t end, TensorOptions o) { return arange(0.0, static_cast<double>(end), 1.0, o); }

Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
  BRISK_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  Tensor t = empty({steps}, o.dtype, kCPU);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Fill from both ends, as PyTorch does, so the last value is exactly `end`.
  const int64_t half = steps / 2;
  fill_indexed(t, "linspace", [=](int64_t i) {
    return i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  });
  return on_device(t, o.device);
}

void uniform_(const Tensor& t, double lo, double hi, Generator* gen) {
  BRISK_CHECK(t.device().is_cpu() && t.is_contiguous(), "uniform_: needs a contiguous CPU tensor");
  kernels::check_float("uniform_", t);
  BRISK_CHECK(lo <= hi, "uniform_: low ", lo, " is greater than high ", hi);
  // Draw only as many bits as the dtype's significand holds (as PyTorch does): k * 2^-digits
  // is exact in the dtype, so rounding on store can never turn a value just below 1 into 1.
  const int digits = t.dtype() == DType::F64 ? 53 : t.dtype() == DType::F32 ? 24 : t.dtype() == DType::F16 ? 11 : 8;
  const double scale = std::ldexp(1.0, -digits);
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(t.numel()));
  fill_indexed(t, "uniform_", [=](int64_t i) {
    uint32_t r[4];
    Philox::block(seed, base + static_cast<uint64_t>(i), r);
    const uint64_t bits = ((static_cast<uint64_t>(r[0]) << 32) | r[1]) >> (64 - digits);
    return lo + (hi - lo) * (static_cast<double>(bits) * scale);
  });
  t.bump_version();
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  BRISK_CHECK(t.device().is_cpu() && t.is_contiguous(), "normal_: needs a contiguous CPU tensor");
  kernels::check_float("normal_", t);
  BRISK_CHECK(std >= 0, "normal_: std must be non-negative, got ", std);
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(t.numel()));
  fill_indexed(t, "normal_", [=](int64_t i) {
    uint32_t r[4];
    Philox::block(seed, base + static_cast<uint64_t>(i), r);
    double u1 = 1.0 - Philox::to_unit_double(r[0], r[1]);  // (0, 1]
    double u2 = Philox::to_unit_double(r[2], r[3]);
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  });
  t.bump_version();
}

Tensor rand(const Shape& sizes, TensorOptions o, Generator* gen) {
  Tensor t = empty(sizes, o.dtype, kCPU);
  uniform_(t, 0.0, 1.0, gen);
  return on_device(t, o.device);
}

Tensor randn(const Shape& sizes, TensorOptions o, Generator* gen) {
  Tensor t = empty(sizes, o.dtype, kCPU);
  normal_(t, 0.0, 1.0, gen);
  return on_device(t, o.device);
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions o, Generator* gen) {
  BRISK_CHECK(low < high, "randint: low ", low, " must be less than high ", high);
  Tensor t = empty(sizes, o.dtype, kCPU);
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(t.numel()));
  const uint64_t range = static_cast<uint64_t>(high - low);
  fill_indexed(t, "randint", [=](int64_t i) {
    uint32_t r[4];
    Philox::block(seed, base + static_cast<uint64_t>(i), r);
    uint64_t v = (static_cast<uint64_t>(r[0]) << 32) | r[1];
    return static_cast<double>(low + static_cast<int64_t>(v % range));
  });
  return on_device(t, o.device);
}

Tensor randperm(int64_t n, Generator* gen) {
  BRISK_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  Tensor t = empty({n}, DType::I64, kCPU);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(n));
  // Fisher-Yates with one counter per swap: the permutation depends only on (seed, offset).
  for (int64_t i = n - 1; i > 0; --i) {
    uint32_t r[4];
    Philox::block(seed, base + static_cast<uint64_t>(i), r);
    uint64_t v = (static_cast<uint64_t>(r[0]) << 32) | r[1];
    std::swap(p[i], p[static_cast<int64_t>(v % static_cast<uint64_t>(i + 1))]);
  }
  return t;
}

}  // namespace brisk
