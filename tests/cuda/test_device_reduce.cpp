// Host checks of the GPU reduction family's plans (device/reduce_plan.h, device/topk.h), no GPU
// needed: the plan is run on the host exactly as the kernels run it (each thread's pieces, the
// warp / block / column trees, the split combine), and for many shapes, dims, strides and launch
// sizes every input element must be read exactly once and the result must equal the CPU
// kernels' (exactly for max/min/argmax, NaN and ties included; within tolerance for sums, var,
// logsumexp and softmax). topk's plan is checked in test_device_topk.cpp.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/device/reduce_plan.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/reduce.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace brisk;
namespace K = brisk::kernels;
namespace kd = brisk::kernels::device;

namespace {

// Uniform values in [lo, hi) from `seed` (floored for integer dtypes).
Tensor random(const Shape& s, DType dt, uint64_t seed, double lo = -2.0, double hi = 2.0) {
  Generator gen(seed);
  std::vector<double> v = rand(s, {.dtype = DType::F64}, &gen).to_vector<double>();
  for (double& x : v) {
    x = lo + (hi - lo) * x;
    if (!is_floating(dt)) x = std::floor(x);
  }
  return K::cast(from_vector<double>(v, s), dt);
}

// The same values as `random(s, ...)` laid out in `layout`: 0 contiguous, 1 dims reversed
// (a permuted view of a contiguous buffer), 2 every other element of a buffer twice as wide in
// the last dim, 3 a narrowed view (a window inside a larger buffer).
Tensor in_layout(const Shape& s, DType dt, uint64_t seed, int layout, double lo = -2.0, double hi = 2.0) {
  Tensor x = random(s, dt, seed, lo, hi);
  if (layout == 0 || s.empty()) return x;
  if (layout == 1) {
    std::vector<int64_t> rev;
    for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) rev.push_back(d);
    Tensor buf = K::contiguous(x.permute(rev));
    return buf.permute(rev);  // reversing twice restores the shape
  }
  Shape wide = s;
  if (layout == 2) {
    wide.back() = 2 * s.back();
    Tensor buf = random(wide, dt, seed + 1, lo, hi);
    Strides st = contiguous_strides(wide);
    st.back() = 2;
    Tensor view = buf.as_strided(s, st, buf.offset() + 1);
    K::copy_(view, x);
    return view;
  }
  for (int64_t& d : wide) d += 2;
  Tensor buf = random(wide, dt, seed + 2, lo, hi);
  Tensor view = buf;
  for (size_t d = 0; d < s.size(); ++d) view = view.narrow(static_cast<int64_t>(d), 1, s[d]);
  K::copy_(view, x);
  return view;
}

std::vector<bool> mask_for(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<bool> m(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) m[d < 0 ? d + x.dim() : d] = true;
  return m;
}

// Offsets (in elements, from x's first element) of every element of x.
std::vector<int64_t> element_offsets(const Tensor& x) {
  std::vector<int64_t> offs(1, 0);
  for (int64_t d = 0; d < x.dim(); ++d) {
    std::vector<int64_t> next;
    for (int64_t o : offs)
      for (int64_t i = 0; i < x.size(d); ++i) next.push_back(o + i * x.stride(d));
    offs = std::move(next);
  }
  if (x.numel() == 0) offs.clear();
  return offs;
}

// Counts the reads an emulation makes of x's elements and checks each was read exactly once.
struct ReadCounter {
  std::vector<int64_t> offsets;  // every element's offset
  std::vector<int32_t> reads;    // by offset
  bool stray = false;            // a read outside [0, reads.size())
  explicit ReadCounter(const Tensor& x) : offsets(element_offsets(x)) {
    int64_t hi = 0;
    for (int64_t o : offsets) hi = std::max(hi, o + 1);
    reads.assign(static_cast<size_t>(hi), 0);
  }
  auto counter() {
    return [this](int64_t off) {
      if (off < 0 || off >= static_cast<int64_t>(reads.size()))
        stray = true;
      else
        ++reads[off];
    };
  }
  void expect_each_read_once(const std::string& what) {
    std::vector<int32_t> want(reads.size(), 0);
    for (int64_t o : offsets) ++want[o];
    EXPECT_FALSE(stray) << what << ": the plan reads outside the tensor";
    EXPECT_TRUE(reads == want) << what << ": the plan does not read every element exactly once";
    reset();
  }
  void reset() {
    std::fill(reads.begin(), reads.end(), 0);
    stray = false;
  }
};

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

void expect_close_or_same(double got, double want, double rtol, const std::string& what) {
  if (std::isnan(want) || std::isinf(want)) {
    EXPECT_TRUE(same_value(got, want)) << what << ": got " << got << ", want " << want;
    return;
  }
  EXPECT_NEAR(got, want, rtol * (1 + std::fabs(want))) << what;
}

std::string str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string describe(const Tensor& x, const std::vector<int64_t>& dims, const kd::ReducePlan& p, int sm) {
  std::string s =
      "shape " + str(x.sizes()) + " strides " + str(x.strides()) + " " + dtype_name(x.dtype()) + " dims " + str(dims);
  s += " sm " + std::to_string(sm) + (p.layout == kd::ReduceLayout::Row ? " row" : " column") + " lanes " +
       std::to_string(p.lanes) + " vec " + std::to_string(p.vec) + " splits " + std::to_string(p.splits);
  return s;
}

template <class T>
double rtol_for() {
  if constexpr (std::is_same_v<T, Half>) return 2e-3;
  if constexpr (std::is_same_v<T, BFloat16>) return 1.6e-2;
  if constexpr (std::is_same_v<T, float>) return 2e-6;
  return 1e-12;
}

// Runs sum, mean, prod, amax, amin, var, std, logsumexp (and, for one dim or all, max, min,
// argmax, argmin) through the plan for x over dims, and compares with the CPU kernels.
template <class T>
void check_plan(const Tensor& x, const std::vector<int64_t>& dims, int sm) {
  using A = acc_t<T>;
  using S = kd::sum_acc_t<T>;
  const std::vector<bool> mask = mask_for(x, dims);
  const kd::ReducePlan p = kd::make_reduce_plan(x.sizes(), x.strides(), mask, static_cast<int>(sizeof(T)),
                                                reinterpret_cast<uintptr_t>(x.data_ptr()), sm);
  const std::string what = describe(x, dims, p, sm);
  const T* px = static_cast<const T*>(x.data_ptr());
  ReadCounter rc(x);
  const double rtol = rtol_for<T>();
  constexpr bool kFloat = std::is_floating_point_v<A>;

  // Launch shape: every output covered by the grid, limits respected.
  if (p.n_out > 0) {
    EXPECT_LE(int64_t{p.block_x} * p.block_y, kd::kReduceMaxThreads) << what;
    EXPECT_GE(int64_t{p.grid_x} * (p.layout == kd::ReduceLayout::Row ? p.block_y : p.block_x), p.n_out) << what;
    EXPECT_EQ(p.grid_y, p.splits) << what;
    if (p.splits > 1) {
      EXPECT_EQ(p.chunk % (int64_t{p.lanes} * p.vec), 0) << what;
    }
  }

  const std::vector<S> sums = kd::emulate_reduce(p, kd::SumReduce<S>{}, px, rc.counter());
  rc.expect_each_read_once(what + " (sum)");
  {
    const std::vector<double> want = K::sum(x, dims).to_vector<double>();
    ASSERT_EQ(sums.size(), want.size()) << what;
    for (size_t o = 0; o < want.size(); ++o) {
      if constexpr (kFloat)
        expect_close_or_same(static_cast<double>(kd::from_acc<T>(sums[o])), want[o], rtol, what + " sum");
      else
        EXPECT_EQ(static_cast<double>(sums[o]), want[o]) << what << " sum";
    }
  }
  if constexpr (kFloat) {
    const std::vector<double> want = K::mean(x, dims).to_vector<double>();
    for (size_t o = 0; o < want.size(); ++o)
      expect_close_or_same(static_cast<double>(kd::from_acc<T>(sums[o] / static_cast<S>(p.n_red))), want[o], rtol,
                           what + " mean");
    // var / std: the means, then the squared deviations from them, each through the plan.
    std::vector<S> means(sums.size());
    for (size_t o = 0; o < sums.size(); ++o) means[o] = sums[o] / static_cast<S>(p.n_red);
    const std::vector<S> ss = kd::emulate_reduce(p, kd::SquaredDevReduce<S>{means.data()}, px, rc.counter());
    rc.expect_each_read_once(what + " (var)");
    const double denom = static_cast<double>(std::max<int64_t>(0, p.n_red - 1));
    const std::vector<double> var = K::var(x, dims).to_vector<double>(), sd = K::std(x, dims).to_vector<double>();
    for (size_t o = 0; o < var.size(); ++o) {
      expect_close_or_same(static_cast<double>(kd::from_acc<T>(kd::variance_result(ss[o], denom, false))), var[o],
                           rtol * 10, what + " var");
      expect_close_or_same(static_cast<double>(kd::from_acc<T>(kd::variance_result(ss[o], denom, true))), sd[o],
                           rtol * 10, what + " std");
    }
    const auto lse = kd::emulate_reduce(p, kd::LogSumExpReduce<A>{}, px, rc.counter());
    rc.expect_each_read_once(what + " (logsumexp)");
    const std::vector<double> want_lse = K::logsumexp(x, dims).to_vector<double>();
    for (size_t o = 0; o < want_lse.size(); ++o)
      expect_close_or_same(static_cast<double>(kd::from_acc<T>(kd::logsumexp_result(lse[o]))), want_lse[o],
                           std::max(rtol, 1e-5), what + " logsumexp");
  }
  if (p.n_red == 0) return;  // no identity for the rest
  if constexpr (!std::is_same_v<T, bool>) {
    const auto mx = kd::emulate_reduce(p, kd::ExtremeReduce<kd::MaxOp<A>, A>{}, px, rc.counter());
    rc.expect_each_read_once(what + " (amax)");
    const auto mn = kd::emulate_reduce(p, kd::ExtremeReduce<kd::MinOp<A>, A>{}, px, rc.counter());
    const std::vector<double> want_max = K::amax(x, dims).to_vector<double>(),
                              want_min = K::amin(x, dims).to_vector<double>();
    for (size_t o = 0; o < want_max.size(); ++o) {
      EXPECT_TRUE(same_value(static_cast<double>(mx[o]), want_max[o])) << what << " amax " << o;
      EXPECT_TRUE(same_value(static_cast<double>(mn[o]), want_min[o])) << what << " amin " << o;
    }
    if (dims.size() <= 1) {
      const auto amx = kd::emulate_reduce(p, kd::ArgReduce<kd::ArgMaxOp<A>, A>{}, px, rc.counter());
      const auto amn = kd::emulate_reduce(p, kd::ArgReduce<kd::ArgMinOp<A>, A>{}, px, rc.counter());
      rc.reset();
      std::vector<double> vmax, vmin, imax, imin;
      if (dims.empty()) {
        imax = K::argmax(x).to_vector<double>();
        imin = K::argmin(x).to_vector<double>();
      } else {
        const ValuesIndices a = K::max(x, dims[0]), b = K::min(x, dims[0]);
        vmax = a.values.to_vector<double>();
        vmin = b.values.to_vector<double>();
        imax = a.indices.to_vector<double>();
        imin = b.indices.to_vector<double>();
      }
      for (size_t o = 0; o < imax.size(); ++o) {
        EXPECT_EQ(static_cast<double>(amx[o].index), imax[o]) << what << " argmax " << o;
        EXPECT_EQ(static_cast<double>(amn[o].index), imin[o]) << what << " argmin " << o;
        if (!vmax.empty()) {
          EXPECT_TRUE(same_value(static_cast<double>(amx[o].value), vmax[o])) << what << " max value " << o;
          EXPECT_TRUE(same_value(static_cast<double>(amn[o].value), vmin[o])) << what << " min value " << o;
        }
      }
    }
  }
}

struct ShapeDims {
  Shape shape;
  std::vector<int64_t> dims;
};

const std::vector<ShapeDims>& shape_cases() {
  static const std::vector<ShapeDims> cases = {
      {{}, {}},
      {{1}, {}},
      {{7}, {0}},
      {{1, 1, 5}, {}},
      {{3, 0}, {1}},
      {{5, 31}, {1}},
      {{5, 33}, {-1}},
      {{4, 1000}, {1}},
      {{2, 4096}, {1}},
      {{6, 8}, {}},
      {{1000, 3}, {0}},
      {{300, 40}, {0}},
      {{64, 48}, {0}},
      {{3, 4, 5}, {1}},
      {{3, 4, 5}, {0, 2}},
      {{3, 4, 5}, {-1, 0}},
      {{2, 3, 4, 5}, {1, 3}},
      {{2, 3, 4, 5}, {0, 1, 2}},
      {{2, 3, 40, 17}, {2}},
      {{2, 1, 7, 1, 9}, {2, 4}},
  };
  return cases;
}

}  // namespace

TEST(DeviceReducePlan, EveryElementReadOnceAndResultsEqualTheCpuForManyShapesAndLayouts) {
  uint64_t seed = 1;
  for (const ShapeDims& c : shape_cases()) {
    for (int layout = 0; layout < 4; ++layout) {
      for (int sm : {1, 8, 132}) {
        check_plan<float>(in_layout(c.shape, DType::F32, seed, layout), c.dims, sm);
        check_plan<Half>(in_layout(c.shape, DType::F16, seed + 1, layout), c.dims, sm);
        if (layout < 2) {
          check_plan<double>(in_layout(c.shape, DType::F64, seed + 2, layout), c.dims, sm);
          check_plan<BFloat16>(in_layout(c.shape, DType::BF16, seed + 3, layout), c.dims, sm);
          check_plan<int32_t>(in_layout(c.shape, DType::I32, seed + 4, layout, -50, 50), c.dims, sm);
          check_plan<uint8_t>(in_layout(c.shape, DType::U8, seed + 5, layout, 0, 4), c.dims, sm);
        }
        if (::testing::Test::HasFailure()) return;
        seed += 7;
      }
    }
  }
}

TEST(DeviceReducePlan, FewOutputsOfAHugeReductionSplitAndCombineInOrder) {
  // One output over 600k elements: many splits, each a partial, combined in split order.
  Tensor x = random({600000}, DType::F32, 11);
  const kd::ReducePlan p =
      kd::make_reduce_plan(x.sizes(), x.strides(), {true}, 4, reinterpret_cast<uintptr_t>(x.data_ptr()), 132);
  EXPECT_EQ(p.layout, kd::ReduceLayout::Row);
  EXPECT_EQ(p.vec, 4);
  EXPECT_EQ(p.lanes, kd::kReduceMaxThreads);
  EXPECT_GT(p.splits, 1);
  check_plan<float>(x, {}, 132);
  // Three columns of 200k rows (outputs too narrow for the column layout): row layout, strided.
  Tensor y = random({200000, 3}, DType::F32, 12);
  const kd::ReducePlan q =
      kd::make_reduce_plan(y.sizes(), y.strides(), {true, false}, 4, reinterpret_cast<uintptr_t>(y.data_ptr()), 132);
  EXPECT_EQ(q.layout, kd::ReduceLayout::Row);
  EXPECT_EQ(q.vec, 1);
  EXPECT_GT(q.splits, 1);
  check_plan<float>(y, {0}, 132);
  // 64 contiguous columns of 50k rows: the column layout, with splits.
  Tensor z = random({50000, 64}, DType::F16, 13);
  const kd::ReducePlan r =
      kd::make_reduce_plan(z.sizes(), z.strides(), {true, false}, 2, reinterpret_cast<uintptr_t>(z.data_ptr()), 132);
  EXPECT_EQ(r.layout, kd::ReduceLayout::Column);
  EXPECT_GT(r.lanes, 1);
  EXPECT_GT(r.splits, 1);
  check_plan<Half>(z, {0}, 132);
}

TEST(DeviceReducePlan, RowsUseAWarpOrABlockAnd128BitLoadsWhenAligned) {
  Tensor x = random({64, 1000}, DType::F32, 21);
  kd::ReducePlan p =
      kd::make_reduce_plan(x.sizes(), x.strides(), {false, true}, 4, reinterpret_cast<uintptr_t>(x.data_ptr()), 132);
  EXPECT_EQ(p.layout, kd::ReduceLayout::Row);
  EXPECT_EQ(p.lanes, kd::kWarp);
  EXPECT_EQ(p.block_y, 8u);
  EXPECT_EQ(p.vec, 4);
  // A misaligned start or a row length that is not a whole number of vectors: scalar loads.
  p = kd::make_reduce_plan(x.sizes(), x.strides(), {false, true}, 4, reinterpret_cast<uintptr_t>(x.data_ptr()) + 4,
                           132);
  EXPECT_EQ(p.vec, 1);
  Tensor y = random({64, 1001}, DType::F32, 22);
  p = kd::make_reduce_plan(y.sizes(), y.strides(), {false, true}, 4, reinterpret_cast<uintptr_t>(y.data_ptr()), 132);
  EXPECT_EQ(p.vec, 1);
  Tensor z = random({8, 50304}, DType::BF16, 23);
  p = kd::make_reduce_plan(z.sizes(), z.strides(), {false, true}, 2, reinterpret_cast<uintptr_t>(z.data_ptr()), 132);
  EXPECT_EQ(p.vec, 8);
  EXPECT_GT(p.lanes, kd::kWarp);
  check_plan<BFloat16>(z, {1}, 132);
}

TEST(DeviceReducePlan, MaxAndArgmaxMatchTheCpuExactlyWithNaNAndTies) {
  // Values from {0, 1, 2} (ties everywhere) with NaNs sprinkled in, over rows of many lengths.
  for (int64_t n : {1, 2, 31, 33, 257, 1000, 5000}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      Tensor base = random({6, n}, DType::F64, seed * 100 + static_cast<uint64_t>(n), 0, 3);
      std::vector<double> v = base.to_vector<double>();
      Generator gen(seed);
      std::vector<double> u = rand({6 * n}, {.dtype = DType::F64}, &gen).to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i) {
        const int64_t row = static_cast<int64_t>(i) / n;
        // Row 0 none; row 1 all NaN; rows 2..5 a few.
        if (row == 1 || (row >= 2 && u[i] < 0.02 * row)) v[i] = std::nan("");
      }
      for (DType dt : {DType::F32, DType::F16}) {
        Tensor x = K::cast(from_vector<double>(v, {6, n}), dt);
        for (int sm : {1, 132}) {
          if (dt == DType::F32) {
            check_plan<float>(x, {1}, sm);
            check_plan<float>(x, {}, sm);
            check_plan<float>(x.t(), {0}, sm);
          } else {
            check_plan<Half>(x, {1}, sm);
            check_plan<Half>(x.t(), {0}, sm);
          }
        }
      }
    }
  }
}

TEST(DeviceReducePlan, ColumnTreeAndSplitCombineFollowTheDocumentedOrder) {
  // Integers make the order visible: with a non-commutative "combine" (keep the left), the tree
  // returns lane 0's value, and the splits' combine starts from split 0.
  struct Left {
    static int identity() { return -1; }
    static int combine(int a, int) { return a; }
  };
  EXPECT_EQ(kd::emulate_column_tree<Left>(std::vector<int>{5, 6, 7, 8}), 5);
  const int partials[] = {10, 11, 20, 21, 30, 31};  // (splits 3, outputs 2)
  EXPECT_EQ(kd::combine_splits<Left>(partials, 2, 3, 1), 11);
  struct Sum {
    static int identity() { return 0; }
    static int combine(int a, int b) { return a + b; }
  };
  EXPECT_EQ(kd::emulate_column_tree<Sum>(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}), 36);
  EXPECT_EQ(kd::combine_splits<Sum>(partials, 2, 3, 0), 60);
}

// --- softmax rows -------------------------------------------------------------------------------

namespace {

template <class T>
void check_softmax_rows(const Tensor& x, bool aligned) {
  using A = acc_t<T>;
  const int64_t rows = x.size(0), n = x.size(1);
  const kd::SoftmaxPlan p = kd::make_softmax_plan(rows, n, static_cast<int>(sizeof(T)), aligned);
  const std::string what = "softmax rows (" + std::to_string(rows) + ", " + std::to_string(n) + ") " +
                           dtype_name(x.dtype()) + " lanes " + std::to_string(p.lanes) + " vec " +
                           std::to_string(p.vec);
  EXPECT_LE(p.lanes, 1024) << what;
  EXPECT_GE(int64_t{p.grid_x} * p.rows_per_block, rows) << what;
  ReadCounter rc(x);
  const auto states = kd::emulate_softmax_states(p, static_cast<const T*>(x.data_ptr()), rc.counter());
  rc.expect_each_read_once(what);
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> sm = K::softmax(x, -1).to_vector<double>(), lsm = K::log_softmax(x, -1).to_vector<double>(),
                            lse = K::logsumexp(x, {-1}).to_vector<double>();
  const double rtol = std::is_same_v<T, float> ? 1e-5 : rtol_for<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const kd::SoftmaxNorm<A> s = kd::softmax_norm(states[r], false), l = kd::softmax_norm(states[r], true);
    expect_close_or_same(static_cast<double>(kd::from_acc<T>(kd::logsumexp_result(states[r]))), lse[r], rtol,
                         what + " logsumexp row " + std::to_string(r));
    for (int64_t i = 0; i < n; ++i) {
      const A xi = static_cast<A>(xv[r * n + i]);
      const double y = static_cast<double>(kd::from_acc<T>(kd::softmax_value(xi, s, false)));
      const double ly = static_cast<double>(kd::from_acc<T>(kd::softmax_value(xi, l, true)));
      if (std::isnan(sm[r * n + i]) || std::isnan(y)) {
        EXPECT_TRUE(std::isnan(sm[r * n + i]) && std::isnan(y)) << what << " softmax NaN at " << r << ", " << i;
        EXPECT_TRUE(std::isnan(lsm[r * n + i]) && std::isnan(ly)) << what << " log_softmax NaN at " << r << ", " << i;
        continue;
      }
      EXPECT_NEAR(y, sm[r * n + i], rtol * std::fabs(sm[r * n + i]) + 1e-7) << what << " softmax " << r << ", " << i;
      expect_close_or_same(ly, lsm[r * n + i], rtol,
                           what + " log_softmax " + std::to_string(r) + ", " + std::to_string(i));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace

TEST(DeviceSoftmaxPlan, RowsOfEveryLengthMatchTheCpuThroughTheOnlineState) {
  for (int64_t n : {1, 31, 33, 256, 1000, 1024, 4099, 50304}) {
    const int64_t rows = n > 4096 ? 3 : 9;
    Tensor x = random({rows, n}, DType::F32, static_cast<uint64_t>(n), -8, 8);
    check_softmax_rows<float>(x, true);
    check_softmax_rows<float>(x, false);
    check_softmax_rows<Half>(K::cast(x, DType::F16), true);
    check_softmax_rows<BFloat16>(K::cast(x, DType::BF16), true);
  }
  const kd::SoftmaxPlan shortp = kd::make_softmax_plan(100, 1000, 4, true);
  EXPECT_EQ(shortp.lanes, kd::kWarp);
  EXPECT_EQ(shortp.rows_per_block, 8);
  EXPECT_EQ(shortp.vec, 4);
  const kd::SoftmaxPlan longp = kd::make_softmax_plan(8, 50304, 2, true);
  EXPECT_EQ(longp.lanes, 1024);
  EXPECT_EQ(longp.rows_per_block, 1);
  EXPECT_EQ(longp.vec, 8);
}

TEST(DeviceSoftmaxPlan, NaNAndInfiniteRowsGiveTheCpuResults) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const int64_t n = 40;
  std::vector<double> v(5 * n);
  for (int64_t i = 0; i < 5 * n; ++i) v[i] = std::sin(static_cast<double>(i));
  v[0 * n + 7] = nan;                                   // a NaN: the row is NaN
  v[1 * n + 3] = inf;                                   // +inf: NaN on the CPU (inf - inf)
  for (int64_t i = 0; i < n; ++i) v[2 * n + i] = -inf;  // all -inf: NaN, logsumexp -inf
  v[3 * n + 5] = -inf;                                  // one -inf: probability 0
  v[4 * n + 1] = inf, v[4 * n + 2] = inf;               // two +inf
  Tensor x = from_vector<double>(v, {5, n});
  check_softmax_rows<float>(K::cast(x, DType::F32), true);
  check_softmax_rows<double>(x, true);
  check_softmax_rows<Half>(K::cast(x, DType::F16), false);
}
