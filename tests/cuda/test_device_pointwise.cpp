// Host checks of the per-element code the CUDA elementwise and factory kernels run: the functors
// of device/pointwise.h reproduce the CPU kernels (bit for bit, except where the CPU uses its
// vectorised exp), the draws of device/random.h and the values of device/factory.h are what the
// CPU factories store, the portable log and cos are within an ulp, and the vector split plus
// grid-stride walk of the elementwise loop covers every element exactly once.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/device/factory.h>
#include <brisk/kernels/device/indexing.h>
#include <brisk/kernels/device/pointwise.h>
#include <brisk/kernels/device/random.h>
#include <brisk/kernels/device/vec.h>
#include <brisk/kernels/dispatch.h>
#include <brisk/kernels/elementwise.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace brisk;
using kernels::BinaryOp;
using kernels::CompareOp;
using kernels::op_name;
using kernels::UnaryOp;
namespace dev = brisk::kernels::device;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Values every op meets: signed zeros, infinities, NaN, small and large magnitudes, then random
// ones in [-4, 4).
std::vector<double> test_values(uint64_t seed, int random_count = 300) {
  std::vector<double> v = {0.0,   -0.0,   1.0,  -1.0,  0.5,  -0.5,  2.0,   -2.0,  3.0,  -3.0,
                           1e-3,  -1e-3,  1e-6, -1e-6, 10.0, -10.0, 20.0,  -20.0, 87.0, -87.0,
                           100.0, -100.0, kInf, -kInf, kNaN, 0.25,  -0.75, 1e30,  -1e30};
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-4.0, 4.0);
  for (int i = 0; i < random_count; ++i) v.push_back(dist(gen));
  return v;
}

Tensor cpu_tensor(const std::vector<double>& v, DType dt) {
  return kernels::cast(from_vector<double>(v, {static_cast<int64_t>(v.size())}), dt);
}

template <class T>
std::vector<T> elements(const Tensor& t) {
  Tensor c = kernels::contiguous(t);
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);
    return (std::isnan(fa) && std::isnan(fb)) || a.bits == b.bits;
  } else if constexpr (std::is_floating_point_v<T>) {
    // Bit for bit on purpose (-0 vs +0 differ): NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
  } else {
    return a == b;
  }
}

// Within rtol relative (or atol absolute), NaN matching NaN and infinities matching exactly.
bool close_value(double a, double b, double rtol, double atol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}

template <class T>
double as_double(T v) {
  return static_cast<double>(dev::to_acc(v));
}

template <class F>
void for_float_types(F&& f) {
  f(double{}, DType::F64);
  f(float{}, DType::F32);
  f(Half{}, DType::F16);
  f(BFloat16{}, DType::BF16);
}

template <class F>
void for_int_types(F&& f) {
  f(int32_t{}, DType::I32);
  f(int64_t{}, DType::I64);
  f(uint8_t{}, DType::U8);
}

template <class F, size_t... I>
void for_each_unary_op(F&& f, std::index_sequence<I...>) {
  (f(std::integral_constant<UnaryOp, static_cast<UnaryOp>(I)>{}), ...);
}
template <class F>
void for_each_unary_op(F&& f) {
  for_each_unary_op(f, std::make_index_sequence<static_cast<size_t>(UnaryOp::Expm1) + 1>{});
}

template <class F, size_t... I>
void for_each_binary_op(F&& f, std::index_sequence<I...>) {
  (f(std::integral_constant<BinaryOp, static_cast<BinaryOp>(I)>{}), ...);
}
template <class F>
void for_each_binary_op(F&& f) {
  for_each_binary_op(f, std::make_index_sequence<static_cast<size_t>(BinaryOp::Minimum) + 1>{});
}

// The CPU computes exp (and so sigmoid and silu) and tanh (and so GELU's tanh form) in f32 with
// vectorised polynomials (exp within 2 ulp, 0 below -87.33; tanh within 3 ulp); the functors use
// libm's expf and tanhf (CUDA's on the device).
bool uses_fast_math(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Sigmoid || op == UnaryOp::Silu || op == UnaryOp::Tanh ||
         op == UnaryOp::GeluTanh;
}

// GELU's tanh form at negative x is 0.5 x (1 + tanh(..)), and silu's gradient s (1 + x (1 - s))
// crosses zero near x = -1.28: the sums cancel, so a few ulp of tanh or sigmoid (or an FMA
// contracted in one build and not in the other) become an absolute error of about ulp(1) * |x|
// rather than a relative one.
double cancel_atol(UnaryOp op, double x) {
  return op == UnaryOp::GeluTanh || op == UnaryOp::Silu ? 2.4e-7 * std::fabs(x) : 0.0;
}

// Tolerance for the fast-exp ops, per storage type: 4 ulp of f32, or one ulp of a 16-bit type.
template <class T>
double fast_exp_rtol() {
  if constexpr (std::is_same_v<T, float>)
    return 5e-7;
  else if constexpr (std::is_same_v<T, Half>)
    return 1e-3;
  else
    return 8e-3;
}

}  // namespace

// --- unary ------------------------------------------------------------------------------------

TEST(DevicePointwise, UnaryFunctorsReproduceTheCpuKernelsForEveryOpAndFloatType) {
  const std::vector<double> values = test_values(1);
  for_float_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor x = cpu_tensor(values, dt);
    const std::vector<T> xs = elements<T>(x);
    for_each_unary_op([&](auto op_tag) {
      constexpr UnaryOp op = decltype(op_tag)::value;
      const std::vector<T> want = elements<T>(kernels::unary(op, x));
      const dev::UnaryFn<op, A> f{};
      int bad = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const T got = dev::from_acc<T>(f(dev::to_acc(xs[i])));
        const bool ok = uses_fast_math(op) && !std::is_same_v<T, double>
                            ? close_value(as_double(got), as_double(want[i]), fast_exp_rtol<T>(),
                                          1e-37 + cancel_atol(op, as_double(xs[i])))
                            : same_value(got, want[i]);
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << op_name(op) << " (op " << static_cast<int>(op) << ") in " << dtype_name(dt)
                        << " at x = " << as_double(xs[i]) << ": functor " << as_double(got) << ", cpu "
                        << as_double(want[i]);
      }
    });
  });
}

TEST(DevicePointwise, IntegerUnaryFunctorsWrapAroundAsTheCpuDoes) {
  for_int_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    std::vector<T> raw = {
        0, 1, 2, 3, 7, 15, 16, 100, 127, std::numeric_limits<T>::max(), std::numeric_limits<T>::min()};
    if constexpr (std::is_signed_v<T>) {
      for (T v : {T(-1), T(-2), T(-7), T(-100), T(std::numeric_limits<T>::min() + 1)}) raw.push_back(v);
    } else {
      for (T v : {T(128), T(200), T(255)}) raw.push_back(v);
    }
    Tensor x = from_vector<T>(raw, {static_cast<int64_t>(raw.size())});
    auto check = [&](auto op_tag) {
      constexpr UnaryOp op = decltype(op_tag)::value;
      const std::vector<T> want = elements<T>(kernels::unary(op, x));
      for (size_t i = 0; i < raw.size(); ++i)
        EXPECT_EQ((dev::UnaryFn<op, T>{}(raw[i])), want[i])
            << op_name(op) << " in " << dtype_name(dt) << " at " << static_cast<int64_t>(raw[i]);
    };
    check(std::integral_constant<UnaryOp, UnaryOp::Neg>{});
    check(std::integral_constant<UnaryOp, UnaryOp::Abs>{});
    check(std::integral_constant<UnaryOp, UnaryOp::Relu>{});
    check(std::integral_constant<UnaryOp, UnaryOp::Square>{});
    check(std::integral_constant<UnaryOp, UnaryOp::Sign>{});
  });
  for_each_unary_op([](auto op_tag) {
    constexpr UnaryOp op = decltype(op_tag)::value;
    // The public op computes the others in f32, as the device functors assume.
    const bool int_ok =
        op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu || op == UnaryOp::Square || op == UnaryOp::Sign;
    EXPECT_EQ(dev::unary_takes_integers(op), int_ok) << op_name(op);
    EXPECT_EQ(kernels::unary(op, from_vector<int32_t>({3}, {1})).dtype(), int_ok ? DType::I32 : DType::F32)
        << op_name(op);
  });
}

TEST(DevicePointwise, UnaryBackwardFunctorsReproduceTheCpuKernels) {
  const std::vector<double> values = test_values(2);
  std::vector<double> grads = test_values(3);
  grads.resize(values.size(), 0.7);
  for_float_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor x = cpu_tensor(values, dt), g = cpu_tensor(grads, dt);
    const std::vector<T> xs = elements<T>(x), gs = elements<T>(g);
    for_each_unary_op([&](auto op_tag) {
      constexpr UnaryOp op = decltype(op_tag)::value;
      const Tensor y = kernels::unary(op, x);
      const std::vector<T> ys = elements<T>(y);
      const std::vector<T> want = elements<T>(kernels::unary_backward(op, g, x, y));
      const dev::UnaryBackwardFn<op, A> f{};
      int bad = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const T got = dev::from_acc<T>(f(dev::to_acc(gs[i]), dev::to_acc(xs[i]), dev::to_acc(ys[i])));
        // silu's and GELU's gradients recompute sigmoid and tanh with the CPU's fast exp and tanh.
        const double xv = as_double(xs[i]), gv = as_double(gs[i]);
        const bool ok = (op == UnaryOp::Silu || op == UnaryOp::GeluTanh) && !std::is_same_v<T, double>
                            ? close_value(as_double(got), as_double(want[i]), 4 * fast_exp_rtol<T>(),
                                          1e-30 + 4 * cancel_atol(op, xv) * (1 + xv * xv) * std::fabs(gv))
                            : same_value(got, want[i]);
        if (!ok && ++bad <= 3)
          ADD_FAILURE() << op_name(op) << " backward (op " << static_cast<int>(op) << ") in " << dtype_name(dt)
                        << " at x = " << as_double(xs[i]) << ", g = " << as_double(gs[i]) << ": functor "
                        << as_double(got) << ", cpu " << as_double(want[i]);
      }
    });
  });
}

// --- binary -----------------------------------------------------------------------------------

TEST(DevicePointwise, BinaryFunctorsReproduceTheCpuKernelsIncludingNaNAndSignedZeros) {
  std::vector<double> av = test_values(4, 200), bv = test_values(5, 200);
  // Every special value against every other, then random pairs.
  const std::vector<double> specials = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.5, 3.0, kInf, -kInf, kNaN};
  for (double a : specials)
    for (double b : specials) {
      av.push_back(a);
      bv.push_back(b);
    }
  bv.resize(av.size(), 1.5);
  for_float_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor a = cpu_tensor(av, dt), b = cpu_tensor(bv, dt);
    const std::vector<T> as = elements<T>(a), bs = elements<T>(b);
    for_each_binary_op([&](auto op_tag) {
      constexpr BinaryOp op = decltype(op_tag)::value;
      const std::vector<T> want = elements<T>(kernels::binary(op, a, b));
      const dev::BinaryFn<op, A> f{};
      int bad = 0;
      for (size_t i = 0; i < as.size(); ++i) {
        const T got = dev::from_acc<T>(f(dev::to_acc(as[i]), dev::to_acc(bs[i])));
        EXPECT_TRUE(same_value(got, want[i]) || ++bad > 3)
            << op_name(op) << " in " << dtype_name(dt) << " at (" << as_double(as[i]) << ", " << as_double(bs[i])
            << "): functor " << as_double(got) << ", cpu " << as_double(want[i]);
        // The run-time-op form is the same function.
        EXPECT_TRUE(same_value(dev::binary_value<A>(op, dev::to_acc(as[i]), dev::to_acc(bs[i])),
                               dev::binary_value<op, A>(dev::to_acc(as[i]), dev::to_acc(bs[i]))));
      }
    });
  });
}

TEST(DevicePointwise, IntegerBinaryFunctorsIncludingPowMatchTheCpu) {
  for_int_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    std::vector<T> av, bv;
    const int lo = std::is_signed_v<T> ? -6 : 0;
    for (int x = lo; x <= 6; ++x)
      for (int y = std::is_signed_v<T> ? -3 : 0; y <= 9; ++y) {
        av.push_back(static_cast<T>(x));
        bv.push_back(static_cast<T>(y));
      }
    // Wrap-around of the ring ops at the type's ends.
    av.push_back(std::numeric_limits<T>::max());
    bv.push_back(T(2));
    av.push_back(std::numeric_limits<T>::min());
    bv.push_back(T(3));
    const Tensor a = from_vector<T>(av, {static_cast<int64_t>(av.size())});
    const Tensor b = from_vector<T>(bv, {static_cast<int64_t>(bv.size())});
    auto check = [&](auto op_tag, size_t count) {
      constexpr BinaryOp op = decltype(op_tag)::value;
      const std::vector<T> want = elements<T>(kernels::binary(op, a, b));
      for (size_t i = 0; i < count; ++i)
        EXPECT_EQ((dev::BinaryFn<op, T>{}(av[i], bv[i])), want[i])
            << op_name(op) << " in " << dtype_name(dt) << " at (" << int64_t{av[i]} << ", " << int64_t{bv[i]} << ")";
    };
    const size_t all = av.size();
    check(std::integral_constant<BinaryOp, BinaryOp::Add>{}, all);
    check(std::integral_constant<BinaryOp, BinaryOp::Sub>{}, all);
    check(std::integral_constant<BinaryOp, BinaryOp::Mul>{}, all);
    check(std::integral_constant<BinaryOp, BinaryOp::Maximum>{}, all);
    check(std::integral_constant<BinaryOp, BinaryOp::Minimum>{}, all);
    // pow: the CPU goes through double and truncates; equal wherever that is exact (here every
    // result fits in 53 bits; u8 results wrap modulo 256 on both sides). 0 to a negative power
    // is excluded (+inf converted to an integer: undefined in C++).
    const std::vector<T> want = elements<T>(kernels::binary(BinaryOp::Pow, a, b));
    for (size_t i = 0; i + 2 < all; ++i) {
      if (av[i] == 0 && static_cast<int64_t>(bv[i]) < 0) continue;
      EXPECT_EQ(dev::int_pow<T>(av[i], bv[i]), want[i])
          << "pow in " << dtype_name(dt) << " at (" << int64_t{av[i]} << ", " << int64_t{bv[i]} << ")";
    }
  });
  EXPECT_EQ(dev::int_pow<int64_t>(3, 39), 4052555153018976267);  // exact where double would round
  EXPECT_EQ(dev::int_pow<int32_t>(-1, -3), -1);
  EXPECT_EQ(dev::int_pow<int32_t>(-1, -4), 1);
  EXPECT_EQ(dev::int_pow<int32_t>(0, -1), std::numeric_limits<int32_t>::min());
}

TEST(DevicePointwise, ScalarFunctorsReproduceTheCpuInBothOrders) {
  const std::vector<double> values = test_values(6, 100);
  for_float_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor x = cpu_tensor(values, dt);
    const std::vector<T> xs = elements<T>(x);
    for (double s : {2.0, -0.5, 3.0, 0.0, 1.0 / 3.0, kInf, kNaN}) {
      for_each_binary_op([&](auto op_tag) {
        constexpr BinaryOp op = decltype(op_tag)::value;
        const std::vector<T> want = elements<T>(kernels::binary_scalar(op, x, s));
        const std::vector<T> want_first = elements<T>(kernels::binary_scalar(op, x, s, true));
        const dev::BinaryScalarFn<op, A> f{static_cast<A>(s)};
        const dev::ScalarBinaryFn<A> g{op, static_cast<A>(s)};
        for (size_t i = 0; i < xs.size(); ++i) {
          EXPECT_TRUE(same_value(dev::from_acc<T>(f(dev::to_acc(xs[i]))), want[i]))
              << op_name(op) << " in " << dtype_name(dt) << " at " << as_double(xs[i]) << " op " << s;
          EXPECT_TRUE(same_value(dev::from_acc<T>(g(dev::to_acc(xs[i]))), want_first[i]))
              << op_name(op) << " in " << dtype_name(dt) << " at " << s << " op " << as_double(xs[i]);
        }
      });
    }
  });
  // Integer tensors with integral scalars stay integers (and wrap).
  Tensor xi = from_vector<int32_t>({-7, -1, 0, 1, 5, 2147483647}, {6});
  const std::vector<int32_t> xs = elements<int32_t>(xi);
  for_each_binary_op([&](auto op_tag) {
    constexpr BinaryOp op = decltype(op_tag)::value;
    if constexpr (op != BinaryOp::Div) {
      const Tensor out = kernels::binary_scalar(op, xi, 2.0);
      ASSERT_EQ(out.dtype(), DType::I32) << op_name(op);
      const std::vector<int32_t> want = elements<int32_t>(out);
      // (pow of the last value overflows, which the CPU's double pow makes undefined)
      for (size_t i = 0; i < xs.size() - (op == BinaryOp::Pow ? 1 : 0); ++i)
        EXPECT_EQ((dev::BinaryScalarFn<op, int32_t>{2}(xs[i])), want[i]) << op_name(op) << " at " << xs[i];
    }
  });
}

// --- comparisons, where, clamp, in place ----------------------------------------------------------

TEST(DevicePointwise, ComparisonFunctorsMatchTheCpuWithNaN) {
  std::vector<double> av = test_values(7, 50), bv = test_values(8, 50);
  bv[0] = kNaN;
  bv[5] = av[5];
  bv[6] = av[6];
  const CompareOp ops[] = {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge};
  for_float_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor a = cpu_tensor(av, dt), b = cpu_tensor(bv, dt);
    const std::vector<T> as = elements<T>(a), bs = elements<T>(b);
    for (CompareOp op : ops) {
      const std::vector<bool> want = kernels::compare(op, a, b).to_vector<bool>();
      const dev::CompareFn<A> f{op};
      for (size_t i = 0; i < as.size(); ++i)
        EXPECT_EQ(f(dev::to_acc(as[i]), dev::to_acc(bs[i])), want[i]) << op_name(op) << " in " << dtype_name(dt);
      for (double s : {0.0, 0.5, -1.0, kNaN, kInf}) {
        const std::vector<bool> want_s = kernels::compare_scalar(op, a, s).to_vector<bool>();
        const dev::CompareScalarFn<A> fs{op, s};
        for (size_t i = 0; i < as.size(); ++i)
          EXPECT_EQ(fs(dev::to_acc(as[i])), want_s[i]) << op_name(op) << " scalar " << s << " in " << dtype_name(dt);
      }
    }
  });
  // An i64 beyond 2^53 meets a scalar in double, as on the CPU.
  const Tensor big = from_vector<int64_t>({(int64_t{1} << 53) + 1}, {1});
  EXPECT_EQ((dev::CompareScalarFn<int64_t>{CompareOp::Eq, 9007199254740992.0}((int64_t{1} << 53) + 1)),
            kernels::compare_scalar(CompareOp::Eq, big, 9007199254740992.0).to_vector<bool>()[0]);
}

TEST(DevicePointwise, WhereClampAndInPlaceFunctorsMatchTheCpu) {
  const std::vector<double> values = test_values(9);
  for_float_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor x = cpu_tensor(values, dt);
    const std::vector<T> xs = elements<T>(x);
    std::vector<double> gv(values.size());
    for (size_t i = 0; i < gv.size(); ++i) gv[i] = 0.25 * static_cast<double>(i % 13) - 1.0;
    const Tensor g = cpu_tensor(gv, dt);
    const std::vector<T> gs = elements<T>(g);
    // where
    const Tensor cond = kernels::compare_scalar(CompareOp::Gt, g, 0.0);
    const std::vector<bool> cs = cond.to_vector<bool>();
    const std::vector<T> want_where = elements<T>(kernels::where(cond, x, g));
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_TRUE(same_value(
          dev::from_acc<T>(dev::WhereFn<A>{}(static_cast<bool>(cs[i]), dev::to_acc(xs[i]), dev::to_acc(gs[i]))),
          want_where[i]));
    // clamp and its gradient, with each bound optional
    const std::pair<std::optional<double>, std::optional<double>> bounds[] = {
        {-1.0, 2.5}, {0.5, std::nullopt}, {std::nullopt, -0.25}, {-kInf, kInf}};
    for (auto [lo, hi] : bounds) {
      const std::vector<T> want = elements<T>(kernels::clamp(x, lo, hi));
      const std::vector<T> want_g = elements<T>(kernels::clamp_backward(g, x, lo, hi));
      const dev::ClampFn<A> f{lo.has_value(), hi.has_value(), lo ? static_cast<A>(*lo) : A(0),
                              hi ? static_cast<A>(*hi) : A(0)};
      const dev::ClampBackwardFn<A> fb{lo.has_value(), hi.has_value(), lo ? static_cast<A>(*lo) : A(0),
                                       hi ? static_cast<A>(*hi) : A(0)};
      for (size_t i = 0; i < xs.size(); ++i) {
        EXPECT_TRUE(same_value(dev::from_acc<T>(f(dev::to_acc(xs[i]))), want[i]))
            << "clamp in " << dtype_name(dt) << " at " << as_double(xs[i]);
        EXPECT_TRUE(same_value(dev::from_acc<T>(fb(dev::to_acc(gs[i]), dev::to_acc(xs[i]))), want_g[i]))
            << "clamp backward in " << dtype_name(dt) << " at " << as_double(xs[i]);
      }
    }
    // add_ (alpha 1 and not) and mul_scalar_
    for (double alpha : {1.0, 0.3, -2.0}) {
      Tensor acc = kernels::contiguous(x).clone();
      kernels::add_(acc, g, alpha);
      const std::vector<T> want = elements<T>(acc);
      const dev::AddScaledFn<A> f{static_cast<A>(alpha)};
      for (size_t i = 0; i < xs.size(); ++i)
        EXPECT_TRUE(same_value(dev::from_acc<T>(f(dev::to_acc(xs[i]), dev::to_acc(gs[i]))), want[i]))
            << "add_ alpha " << alpha << " in " << dtype_name(dt) << " at " << as_double(xs[i]);
    }
    Tensor scaled = kernels::contiguous(x).clone();
    kernels::mul_scalar_(scaled, -0.7);
    const std::vector<T> want = elements<T>(scaled);
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_TRUE(same_value(dev::from_acc<T>(dev::MulScalarFn<A>{static_cast<A>(-0.7)}(dev::to_acc(xs[i]))), want[i]));
  });
  // Integer clamp and add_ (u8 wraps).
  const Tensor xi = from_vector<uint8_t>({0, 3, 100, 200, 255}, {5});
  const std::vector<uint8_t> clamped = elements<uint8_t>(kernels::clamp(xi, 2.0, 150.0));
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ((dev::ClampFn<uint8_t>{true, true, 2, 150}(elements<uint8_t>(xi)[i])), clamped[i]);
  Tensor acc = xi.clone();
  kernels::add_(acc, xi, 3.0);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ((dev::AddScaledFn<uint8_t>{3}(elements<uint8_t>(xi)[i], elements<uint8_t>(xi)[i])),
              elements<uint8_t>(acc)[i]);
}

// --- factories ----------------------------------------------------------------------------------

namespace {

// ulps between two finite doubles of the same sign.
int64_t ulp_distance(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  if (ia < 0) ia = std::numeric_limits<int64_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<int64_t>::min() - ib;
  return ia > ib ? ia - ib : ib - ia;
}

}  // namespace

TEST(DeviceRandom, StrictProductsAreNeverFusedAndFusedOnesAlwaysAre) {
  // a * b = 1 - 2^-60 exactly: rounded on its own it is 1, fused with - 1 it is -2^-60. The
  // host compiler would fuse a plain a * b - 1 on an FMA target; Strict must not let it.
  volatile double va = 1.0 + 0x1p-30, vb = 1.0 - 0x1p-30;
  const double a = va, b = vb;
  EXPECT_EQ((dev::Strict(a) * b - 1.0).v, 0.0);
  EXPECT_EQ(dev::unfused_mul(a, b) - 1.0, 0.0);
  EXPECT_EQ(dev::fused_mul_add(a, b, -1.0), -0x1p-60);
}

TEST(DeviceRandom, PortableLogIsWithinAnUlpOfLibm) {
  std::mt19937_64 gen(10);
  auto check = [&](double u) {
    const int64_t d = ulp_distance(dev::portable_log(u), std::log(u));
    EXPECT_LE(d, 1) << "log(" << u << ") = " << dev::portable_log(u) << ", libm " << std::log(u);
  };
  // The Box-Muller inputs: k * 2^-53 in (0, 1], with the ends and values near 1 (|f| < 2^-20).
  for (int i = 0; i < 200000; ++i) check(static_cast<double>((gen() >> 11) + 1) * 0x1p-53);
  for (int e = 1; e <= 53; ++e) check(std::ldexp(1.0, -e));
  for (int k = 1; k < 5000; ++k) {
    check(1.0 - k * 0x1p-53);
    check(1.0 - k * 0x1p-30);
  }
  check(1.0);
  EXPECT_EQ(dev::portable_log(1.0), 0.0);
  // And beyond (0, 1]: any positive normal double.
  for (double x : {2.0, 10.0, 1e300, 1e-300, 0.7071067811865476, 1.4142135623730951}) check(x);
}

// Two ulps: the polynomial's half ulp plus the one rounding of the argument 2 pi r.
TEST(DeviceRandom, PortableCosOfTurnsIsWithinTwoUlpsOfAnExactReference) {
  std::mt19937_64 gen(11);
  auto reference = [](double u) {
    // Reduce exactly to quarter turns, then evaluate in long double.
    const int q = static_cast<int>(std::floor(u * 4 + 0.5));
    const long double x = (static_cast<long double>(u) - q * 0.25L) * 6.283185307179586476925286766559L;
    switch (q & 3) {
      case 0:
        return static_cast<double>(std::cos(x));
      case 1:
        return static_cast<double>(-std::sin(x));
      case 2:
        return static_cast<double>(-std::cos(x));
      default:
        return static_cast<double>(std::sin(x));
    }
  };
  int64_t worst = 0;
  auto check = [&](double u) {
    const double got = dev::cos_two_pi(u), want = reference(u);
    const int64_t d = std::signbit(got) == std::signbit(want) ? ulp_distance(got, want) : (got == want ? 0 : 99);
    worst = std::max(worst, d);
    EXPECT_LE(d, 2) << "cos(2 pi " << u << ") = " << got << ", reference " << want;
  };
  for (int i = 0; i < 200000; ++i) check(static_cast<double>(gen() >> 11) * 0x1p-53);
  for (int k = 0; k <= 64; ++k) {
    check(k / 64.0);
    check(k / 64.0 + 0x1p-40);
    if (k > 0) check(k / 64.0 - 0x1p-53);
  }
  EXPECT_EQ(dev::cos_two_pi(0.0), 1.0);
  EXPECT_EQ(dev::cos_two_pi(0.5), -1.0);
  EXPECT_LE(worst, 2);
}

TEST(DeviceRandom, DrawsAreWhatTheCpuFactoriesStoreInEveryDtype) {
  for_float_types([&](auto tag, DType dt) {
    using T = decltype(tag);
    Generator g(123);
    g.reserve(17);  // a nonzero offset
    const uint64_t base = g.state().offset;
    const Tensor u = rand({1001}, {.dtype = dt}, &g);
    const Tensor n = randn({1001}, {.dtype = dt}, &g);
    const int digits = dt == DType::F64 ? 53 : dt == DType::F32 ? 24 : dt == DType::F16 ? 11 : 8;
    const dev::UniformDraw ud{123, base, 0.0, 1.0, digits, std::ldexp(1.0, -digits)};
    const dev::NormalDraw nd{123, base + 1001, 0.0, 1.0};
    const std::vector<T> us = elements<T>(u), ns = elements<T>(n);
    for (int64_t i = 0; i < 1001; ++i) {
      ASSERT_TRUE(same_value(dev::store_double<T>(ud(i)), us[i])) << dtype_name(dt) << " rand at " << i;
      ASSERT_TRUE(same_value(dev::store_double<T>(nd(i)), ns[i])) << dtype_name(dt) << " randn at " << i;
    }
  });
  for (DType dt : {DType::I64, DType::I32, DType::U8, DType::F32, DType::F16, DType::Bool}) {
    const int64_t low = dt == DType::U8 || dt == DType::Bool ? 0 : -3;  // in range of the dtype
    Generator g(5);
    const Tensor r = randint(low, 250, {777}, {.dtype = dt}, &g);
    const std::vector<double> got = r.to_vector<double>();
    const dev::RandintDraw d{5, 0, low, static_cast<uint64_t>(250 - low)};
    for (int64_t i = 0; i < 777; ++i) {
      double want = d(i);
      if (dt == DType::Bool) want = want != 0.0;
      ASSERT_EQ(got[static_cast<size_t>(i)], want) << dtype_name(dt) << " randint at " << i;
    }
  }
}

TEST(DeviceRandom, NormalDrawsStayCloseToTheLibmFormula) {
  // The portable log and cos replace libm's in Box-Muller; the values stay what they were up to
  // the rounding of the terms (|mean| + std * radius <= 17 here, so 2e-14 is about 5 ulps of
  // them; the libm formula itself rounds 2 pi u2 before its cos). f32 values are the same but for
  // about one in 10^9.
  const dev::NormalDraw nd{77, 1000, 0.5, 2.0};
  for (int64_t i = 0; i < 100000; ++i) {
    uint32_t r[4];
    Philox::block(77, 1000 + static_cast<uint64_t>(i), r);
    const double u1 = 1.0 - Philox::to_unit_double(r[0], r[1]), u2 = Philox::to_unit_double(r[2], r[3]);
    const double libm = 0.5 + 2.0 * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    const double got = nd(i);
    ASSERT_TRUE(close_value(got, libm, 1e-14, 2e-14)) << i << ": " << got << " vs " << libm;
  }
}

TEST(DeviceRandom, NonContiguousFillsDrawElementIInRowMajorOrder) {
  Generator g1(9), g2(9);
  Tensor wide = zeros({6, 10});
  Tensor view = wide.as_strided({6, 5}, {10, 2}, 0);  // every other column
  uniform_(view, -1.0, 1.0, &g1);
  Tensor dense = empty({6, 5});
  uniform_(dense, -1.0, 1.0, &g2);
  EXPECT_EQ(view.to_vector<float>(), dense.to_vector<float>());
  EXPECT_EQ(g1.state().offset, g2.state().offset);
  const std::vector<float> all = wide.to_vector<float>();
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 1; c < 10; c += 2)
      EXPECT_EQ(all[static_cast<size_t>(r * 10 + c)], 0.0f) << "wrote outside the view";
  Tensor t = wide.t();  // transposed: row-major order of the view, not of memory
  Generator g3(4), g4(4);
  normal_(t, 0.0, 1.0, &g3);
  Tensor t_dense = empty({10, 6});
  normal_(t_dense, 0.0, 1.0, &g4);
  EXPECT_EQ(t.to_vector<float>(), t_dense.to_vector<float>());
  EXPECT_THROW(uniform_(zeros({1, 4}).expand({3, 4}), 0.0, 1.0), Error);
}

TEST(DeviceFactory, ArangeAndLinspaceValuesAreTheCpuValuesInEveryDtype) {
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8}) {
    const double start = dt == DType::U8 ? 0.5 : -3.5;  // values in range of the dtype
    const std::vector<double> a = arange(start, 40.0, 0.7, {.dtype = dt}).to_vector<double>();
    const std::vector<double> l = linspace(start, 7.3, 101, {.dtype = dt}).to_vector<double>();
    kernels::visit_numeric(dt, kCPU, "test", [&](auto tag) {
      using T = decltype(tag);
      const dev::ArangeValues av{start, 0.7};
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(as_double(dev::store_double<T>(av(static_cast<int64_t>(i)))), a[i]) << dtype_name(dt) << " " << i;
      const dev::LinspaceValues lv{start, 7.3, (7.3 - start) / 100.0, 101};
      for (size_t i = 0; i < l.size(); ++i)
        EXPECT_EQ(as_double(dev::store_double<T>(lv(static_cast<int64_t>(i)))), l[i]) << dtype_name(dt) << " " << i;
    });
  }
  // One fused rounding per value, and linspace ends exactly at end.
  const dev::ArangeValues av{0.1, 0.3};
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(av(i), std::fma(static_cast<double>(i), 0.3, 0.1));
  EXPECT_EQ((dev::LinspaceValues{0.1, 0.7, 0.6 / 6, 7})(6), 0.7);
  EXPECT_EQ((dev::LinspaceValues{0.1, 0.7, 0.6 / 6, 7})(0), 0.1);
}

TEST(DeviceFactory, GpuFactoriesFillOnTheDeviceWithOneKernelAndNoCopy) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  using cuda::recording::Kind;
  cuda::recording::Session rec;
  const Device gpu = cuda_device(0);
  Generator g(1);
  const std::pair<std::string, std::function<void()>> cases[] = {
      {"zeros", [&] { zeros({4099}, {.device = gpu}); }},
      {"full",
       [&] {
         full({3, 5}, 2.5, {.dtype = DType::F16, .device = gpu});
       }},
      {"ones_like", [&] { ones_like(empty({7}, DType::I64, gpu)); }},
      {"arange", [&] { arange(1000, {.device = gpu}); }},
      {"linspace", [&] { linspace(0.0, 1.0, 33, {.dtype = DType::BF16, .device = gpu}); }},
      {"rand", [&] { rand({4099}, {.device = gpu}, &g); }},
      {"randn",
       [&] {
         randn({5, 7}, {.dtype = DType::F64, .device = gpu}, &g);
       }},
      {"randint", [&] { randint(0, 10, {99}, {.dtype = DType::I64, .device = gpu}, &g); }},
  };
  for (const auto& [what, run] : cases) {
    rec.clear();
    run();
    EXPECT_EQ(rec.count(Kind::Launch), 1u) << what;
    EXPECT_EQ(rec.count(Kind::Copy), 0u) << what << " made its values on the host";
  }
  // A contiguous fill writes 128-bit vectors: 4099 f32 are 1024 vectors plus a tail of 3, one
  // thread per vector (and the tail) in blocks of 256.
  rec.clear();
  rand({4099}, {.device = gpu}, &g);
  std::vector<cuda::recording::Entry> launches = rec.entries(Kind::Launch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].grid[0], 5u);
  EXPECT_EQ(launches[0].block[0], 256u);
  // A transposed view goes through the strided indexer: one thread per element.
  Tensor t = empty({64, 33}, DType::F32, gpu);
  rec.clear();
  normal_(t.as_strided({33, 64}, {1, 33}, 0), 0.0, 1.0, &g);
  launches = rec.entries(Kind::Launch);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].grid[0], (64u * 33u + 255u) / 256u);
}

// --- the elementwise loop's walk ------------------------------------------------------------------

namespace {

// Emulates elementwise_vector_kernel (cuda/loops.cuh) and fill_indexed_vector_kernel
// (cuda/factory.cu): `total` threads; thread t takes vectors t, t + total, ... of width w, then
// tail elements tail_begin + t, tail_begin + t + total, ... Returns how often each element was
// written.
std::vector<int> emulate_vector_walk(int64_t n, int w, int64_t total) {
  std::vector<int> hits(static_cast<size_t>(n), 0);
  const dev::VecSplit split = dev::vec_split(n, w);
  for (int64_t t = 0; t < total; ++t) {
    for (int64_t v = dev::first_item(t, total); v < split.vectors; v = dev::next_item(v, total))
      for (int l = 0; l < w; ++l) ++hits[static_cast<size_t>(v * w + l)];
    for (int64_t i = split.tail_begin + dev::first_item(t, total); i < n; i = dev::next_item(i, total))
      ++hits[static_cast<size_t>(i)];
  }
  return hits;
}

// The grid launch_elementwise picks: one thread per vector plus the tail, at most 32 blocks per
// SM (132 SMs on an H100), 256 threads per block.
int64_t elementwise_threads(int64_t n, int w, int64_t cap_blocks) {
  const int64_t items = dev::vec_split(n, w).vectors + w;
  const int64_t blocks = std::max<int64_t>(1, std::min((items + 255) / 256, cap_blocks));
  return blocks * 256;
}

}  // namespace

TEST(DeviceLoops, VectorSplitAndGridStrideCoverEveryElementExactlyOnce) {
  std::vector<int64_t> sizes;
  for (int64_t n = 0; n <= 70; ++n) sizes.push_back(n);
  for (int64_t n : {127, 128, 129, 255, 256, 257, 1000, 1023, 1024, 1025, 4099, 65535, 65536, 65537, 300001})
    sizes.push_back(n);
  for (int64_t n : sizes) {
    for (int w : {1, 2, 4, 8, 16}) {
      const dev::VecSplit split = dev::vec_split(n, w);
      ASSERT_EQ(split.vectors * w, split.tail_begin);
      ASSERT_LT(n - split.tail_begin, w);
      ASSERT_GE(n - split.tail_begin, 0);
      // The grid the loop launches (H100 and a tiny cap that forces many grid-stride rounds),
      // and odd thread counts beside it.
      std::vector<int64_t> totals = {elementwise_threads(n, w, int64_t{132} * 32),
                                     elementwise_threads(n, w, 1),
                                     elementwise_threads(n, w, 3),
                                     1,
                                     7,
                                     33};
      for (int64_t total : totals) {
        if (n > 70000 && total < 256) continue;  // slow and adds nothing
        const std::vector<int> hits = emulate_vector_walk(n, w, total);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)], 1)
              << "element " << i << " of n = " << n << ", width " << w << ", " << total << " threads";
      }
    }
  }
}

TEST(DeviceLoops, StridedIndexerVisitsEveryElementOfAViewOnce) {
  // A permuted, sliced view: the offsets of positions 0..n-1 are the view's elements, each once,
  // in row-major order of the view (which random fills rely on).
  Tensor base = arange(0.0, 4.0 * 6 * 10, 1.0, {.dtype = DType::F32}).reshape({4, 6, 10});
  Tensor view = base.permute({2, 0, 1}).as_strided({5, 4, 3}, {2, 60, 20}, 1);
  const auto ix = dev::make_indexer<1>(view.sizes(), {view.strides()});
  const std::vector<float> want = view.to_vector<float>();
  const float* p = base.data<float>() + view.offset();
  for (int64_t i = 0; i < view.numel(); ++i) {
    int64_t off[1];
    ix.offsets(i, off);
    EXPECT_EQ(p[off[0]], want[static_cast<size_t>(i)]) << i;
  }
}
