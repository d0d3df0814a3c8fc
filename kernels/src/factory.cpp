// Factories. Values are computed where the tensor lives (on a GPU by the kernels of
// cuda/factory.cu, on the CPU here), both from the per-element functions of device/factory.h and
// device/random.h: random ones from the counter-based generator, one Philox block per element,
// so a seed gives the same values on every device and thread count.
#include "brisk/kernels/factory.h"

#include <cmath>

#include "brisk/kernels/device/factory.h"
#include "brisk/kernels/device/random.h"
#include "brisk/kernels/dispatch.h"
#include "brisk/kernels/elementwise.h"
#include "cuda/factory.h"

namespace brisk {

namespace {

namespace device = kernels::device;

// Fills a contiguous CPU tensor with f(i) for element i, stored in its dtype.
template <class F>
void fill_indexed_cpu(const Tensor& t, const char* op, const F& f) {
  kernels::visit_all(t.dtype(), t.device(), op, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.data_ptr());
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) p[i] = device::store_double<T>(f(i));
  });
}

// Element i of t in row-major order gets f(i), on t's device, for any strides (t must not
// overlap itself: see check_fillable).
template <class F>
void fill_indexed(const Tensor& t, const char* op, const F& f) {
  if (t.device().is_cuda()) {
    kernels::cuda::fill_indexed(t, op, f);
  } else if (t.is_contiguous()) {
    fill_indexed_cpu(t, op, f);
  } else {
    Tensor tmp = empty(t.sizes(), t.dtype(), kCPU);
    fill_indexed_cpu(tmp, op, f);
    kernels::copy_(t, tmp);
  }
}

// An in-place random fill writes every element once: a broadcast view (stride 0 over a dim of
// size > 1) would get several values for one element.
void check_fillable(const char* op, const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    BRISK_CHECK(t.size(d) <= 1 || t.stride(d) != 0, op, ": cannot fill a broadcast view (shape ", t.sizes(),
                ", strides ", t.strides(), ")");
}

Generator& gen_or_default(Generator* g) {
  return g ? *g : default_generator();
}

}  // namespace

Tensor full(const Shape& sizes, double value, TensorOptions o) {
  Tensor t = empty(sizes, o.dtype, o.device);
  kernels::fill_(t, value);
  return apply_requires_grad(t, o);
}
Tensor zeros(const Shape& sizes, TensorOptions o) {
  return full(sizes, 0.0, o);
}
Tensor ones(const Shape& sizes, TensorOptions o) {
  return full(sizes, 1.0, o);
}
Tensor zeros_like(const Tensor& t) {
  return zeros(t.sizes(), {t.dtype(), t.device()});
}
Tensor ones_like(const Tensor& t) {
  return ones(t.sizes(), {t.dtype(), t.device()});
}
Tensor full_like(const Tensor& t, double value) {
  return full(t.sizes(), value, {t.dtype(), t.device()});
}
Tensor empty_like(const Tensor& t) {
  return empty(t.sizes(), t.dtype(), t.device());
}

Tensor arange(double start, double end, double step, TensorOptions o) {
  BRISK_CHECK(step != 0, "arange: step must be nonzero");
  BRISK_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: range [", start, ", ", end,
              ") is inconsistent with step ", step);
  auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = empty({n}, o.dtype, o.device);
  fill_indexed(t, "arange", device::ArangeValues{start, step});
  return apply_requires_grad(t, o);
}

Tensor arange(int64_t end, TensorOptions o) {
  return arange(0.0, static_cast<double>(end), 1.0, o);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
  BRISK_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  Tensor t = empty({steps}, o.dtype, o.device);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  fill_indexed(t, "linspace", device::LinspaceValues{start, end, step, steps});
  return apply_requires_grad(t, o);
}

void uniform_(const Tensor& t, double lo, double hi, Generator* gen) {
  kernels::check_float("uniform_", t);
  BRISK_CHECK(lo <= hi, "uniform_: low ", lo, " is greater than high ", hi);
  check_fillable("uniform_", t);
  // Draw only as many bits as the dtype's significand holds (as PyTorch does): k * 2^-digits
  // is exact in the dtype, so rounding on store can never turn a value just below 1 into 1.
  const int digits = t.dtype() == DType::F64 ? 53 : t.dtype() == DType::F32 ? 24 : t.dtype() == DType::F16 ? 11 : 8;
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(t.numel()));
  fill_indexed(t, "uniform_", device::UniformDraw{seed, base, lo, hi, digits, std::ldexp(1.0, -digits)});
  t.bump_version();
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  kernels::check_float("normal_", t);
  BRISK_CHECK(std >= 0, "normal_: std must be non-negative, got ", std);
  check_fillable("normal_", t);
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(t.numel()));
  fill_indexed(t, "normal_", device::NormalDraw{seed, base, mean, std});
  t.bump_version();
}

Tensor rand(const Shape& sizes, TensorOptions o, Generator* gen) {
  Tensor t = empty(sizes, o.dtype, o.device);
  uniform_(t, 0.0, 1.0, gen);
  return apply_requires_grad(t, o);
}

Tensor randn(const Shape& sizes, TensorOptions o, Generator* gen) {
  Tensor t = empty(sizes, o.dtype, o.device);
  normal_(t, 0.0, 1.0, gen);
  return apply_requires_grad(t, o);
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions o, Generator* gen) {
  BRISK_CHECK(low < high, "randint: low ", low, " must be less than high ", high);
  Tensor t = empty(sizes, o.dtype, o.device);
  Generator& g = gen_or_default(gen);
  const uint64_t seed = g.seed(), base = g.reserve(static_cast<uint64_t>(t.numel()));
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  fill_indexed(t, "randint", device::RandintDraw{seed, base, low, range});
  return t;
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
    const uint64_t v = device::philox_u64(seed, base + static_cast<uint64_t>(i));
    std::swap(p[i], p[static_cast<int64_t>(v % static_cast<uint64_t>(i + 1))]);
  }
  return t;
}

}  // namespace brisk
