// Host checks of the code GPU kernels run per element and per block (brisk/kernels/device/):
// the magic-number division, the strided indexer against plain offset arithmetic, the vector
// split, and the warp/block reduction trees (emulated on the host in the device's order)
// against the CPU kernels' results.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/device/convert.h>
#include <brisk/kernels/device/indexing.h>
#include <brisk/kernels/device/reduce.h>
#include <brisk/kernels/device/vec.h>
#include <brisk/kernels/reduce.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace brisk;
using namespace brisk::kernels::device;

TEST(FastDivmod, DividesExactlyForEveryDivisorShape) {
  std::mt19937 rng(1);
  std::vector<uint32_t> divisors = {1,
                                    2,
                                    3,
                                    5,
                                    7,
                                    8,
                                    10,
                                    31,
                                    32,
                                    33,
                                    255,
                                    256,
                                    1000,
                                    4095,
                                    65535,
                                    65536,
                                    65537,
                                    (1u << 20) + 1,
                                    (1u << 30) - 1,
                                    1u << 30,
                                    (1u << 31) - 1};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % ((1u << 31) - 1));
  std::vector<uint32_t> numerators = {0, 1, 2, (1u << 31) - 1, (1u << 31) - 2, (1u << 16), (1u << 16) - 1};
  for (int i = 0; i < 200; ++i) numerators.push_back(rng() % (1u << 31));
  for (uint32_t d : divisors) {
    FastDivmod f(d);
    for (uint32_t n : numerators) {
      uint32_t q, r;
      f.divmod(n, q, r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d) << n << " % " << d;
    }
    for (uint32_t k = 0; k < 3; ++k) {  // around multiples of d
      const uint64_t m = static_cast<uint64_t>(d) * (rng() % 1000 + 1);
      for (int64_t delta = -1; delta <= 1; ++delta) {
        const int64_t n = static_cast<int64_t>(m) + delta;
        if (n < 0 || n >= (int64_t{1} << 31)) continue;
        ASSERT_EQ(f.div(static_cast<uint32_t>(n)), static_cast<uint32_t>(n) / d) << n << " / " << d;
      }
    }
  }
}

namespace {

// Offsets the naive way: unravel `linear` over sizes (C order) and dot with each operand's strides.
template <int N>
std::array<int64_t, N> naive_offsets(int64_t linear, const Shape& sizes, const std::array<Strides, N>& strides) {
  std::array<int64_t, N> off{};
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    const int64_t i = linear % sizes[d];
    linear /= sizes[d];
    for (int k = 0; k < N; ++k) off[k] += i * strides[k][d];
  }
  return off;
}

}  // namespace

TEST(StridedIndexer, MatchesPlainOffsetArithmeticForViewsAndBroadcasts) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 300; ++trial) {
    const int nd = 1 + static_cast<int>(rng() % 6);
    Shape sizes(nd);
    for (int64_t& s : sizes) s = 1 + static_cast<int64_t>(rng() % 7);
    // Operand 0: contiguous output; 1: a permuted view; 2: broadcast along random dims.
    Strides out = contiguous_strides(sizes);
    std::vector<int64_t> perm(nd);
    for (int i = 0; i < nd; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    Shape psz(nd);
    for (int i = 0; i < nd; ++i) psz[i] = sizes[perm[i]];
    Strides pst = contiguous_strides(psz), view(nd);
    for (int i = 0; i < nd; ++i) view[perm[i]] = pst[i] * (trial % 3 == 0 ? 3 : 1);  // sometimes gapped
    Strides bcast = contiguous_strides(sizes);
    for (int i = 0; i < nd; ++i)
      if (rng() % 3 == 0) bcast[i] = 0;
    std::array<Strides, 3> st = {out, view, bcast};
    const auto ix = make_indexer<3>(sizes, st);
    const int64_t n = shape_numel(sizes);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off[3];
      ix.offsets(i, off);
      const auto want = naive_offsets<3>(i, sizes, st);
      for (int k = 0; k < 3; ++k)
        ASSERT_EQ(off[k], want[k]) << "trial " << trial << " element " << i << " operand " << k;
    }
  }
}

TEST(StridedIndexer, WideIndicesUseSixtyFourBitArithmetic) {
  // 3 * 2^30 elements: beyond the 32-bit fast path.
  const Shape sizes = {3, int64_t{1} << 15, int64_t{1} << 15};
  std::array<Strides, 2> st = {contiguous_strides(sizes), Strides{1, 3, 3 << 15}};  // operand 1: transposed
  const auto ix = make_indexer<2>(sizes, st);
  EXPECT_FALSE(ix.narrow);
  for (int64_t i : {int64_t{0}, int64_t{1} << 31, (int64_t{3} << 30) - 1, int64_t{2147483647} + 12345}) {
    int64_t off[2];
    ix.offsets(i, off);
    const auto want = naive_offsets<2>(i, sizes, st);
    EXPECT_EQ(off[0], want[0]);
    EXPECT_EQ(off[1], want[1]);
  }
}

TEST(StridedIndexer, CoalescesContiguousDimsAndRejectsTooManyDims) {
  const Shape sizes = {4, 5, 6};
  const auto ix = make_indexer<1>(sizes, {contiguous_strides(sizes)});
  EXPECT_EQ(ix.ndim, 1);  // one run of 120 elements
  Shape many(30, 2);
  Strides gapped(30);
  int64_t stride = 1;
  for (int d = 29; d >= 0; --d, stride *= 3) gapped[d] = stride;  // each stride 3x the next: no dims merge
  EXPECT_THROW((make_indexer<1>(many, {gapped})), Error);
  EXPECT_EQ((make_indexer<1>({0, 5}, {Strides{5, 1}})).ndim, 0) << "an empty tensor needs no index math";
}

TEST(VecSplit, EveryElementIsOwnedByExactlyOneThread) {
  for (int width : {1, 2, 4, 8, 16}) {
    for (int64_t n : {0, 1, 7, 15, 16, 17, 255, 256, 257, 1000, 4099}) {
      for (int64_t threads : {1, 3, 32, 256, 1000}) {
        const VecSplit s = vec_split(n, width);
        ASSERT_LE(s.tail_begin, n);
        ASSERT_LT(n - s.tail_begin, width);
        std::vector<int> seen(static_cast<size_t>(n), 0);
        for (int64_t t = 0; t < threads; ++t) {
          for (int64_t v = first_item(t, threads); v < s.vectors; v = next_item(v, threads))
            for (int l = 0; l < width; ++l) ++seen[static_cast<size_t>(v * width + l)];
          for (int64_t i = s.tail_begin + t; i < n; i += threads) ++seen[static_cast<size_t>(i)];
        }
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(seen[i], 1) << "n " << n << " width " << width << " threads " << threads << " element " << i;
      }
    }
  }
}

TEST(DeviceConvert, SixteenBitRoundTripsMatchTheCoreTypes) {
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    EXPECT_EQ(from_acc<Half>(f).bits, Half(f).bits);
    EXPECT_EQ(from_acc<BFloat16>(f).bits, BFloat16(f).bits);
  }
  EXPECT_EQ((convert<int64_t, Half>(Half(-3.75f))), -3);
  EXPECT_TRUE((convert<bool, float>(0.5f)));
  EXPECT_FALSE((convert<bool, double>(0.0)));
}

namespace {

// Thread values of a block for `n` inputs, each thread accumulating elements t, t + T, ... in
// order (the usual first stage of a block reduction).
template <class Op, class A>
std::vector<A> per_thread(const std::vector<A>& x, int threads) {
  std::vector<A> v(static_cast<size_t>(threads), Op::identity());
  for (size_t i = 0; i < x.size(); ++i) v[i % threads] = Op::combine(v[i % threads], x[i]);
  return v;
}

}  // namespace

TEST(BlockReduce, EmulatedSumEqualsTheCpuSumWithinRounding) {
  std::mt19937 rng(4);
  for (int threads : {32, 64, 128, 256, 512, 1024}) {
    for (int n : {1, 31, 33, 1000, 50304}) {
      std::vector<float> x(static_cast<size_t>(n));
      std::normal_distribution<float> d(0.f, 1.f);
      for (float& v : x) v = d(rng);
      const float got = emulate_block_reduce<SumOp<float>>(per_thread<SumOp<float>>(x, threads));
      const double want = kernels::sum(from_vector<float>(x, {n}), {}).item<double>();
      EXPECT_NEAR(got, want, 1e-5 * std::sqrt(static_cast<double>(n)) + 1e-6) << threads << " threads, n " << n;
    }
  }
}

TEST(BlockReduce, EmulatedMaxAndArgmaxEqualTheCpuIncludingNanAndTies) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 3000), threads = 32 << (trial % 6);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 20));  // many ties
    if (trial % 3 == 0) x[rng() % n] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 5 == 0) x[rng() % n] = std::numeric_limits<float>::quiet_NaN();
    Tensor t = from_vector<float>(x, {n});
    std::vector<ValueIndex<float>> vi(x.size());
    for (size_t i = 0; i < x.size(); ++i) vi[i] = {x[i], static_cast<int64_t>(i)};
    const auto amax = emulate_block_reduce<ArgMaxOp<float>>(per_thread<ArgMaxOp<float>>(vi, threads));
    const auto amin = emulate_block_reduce<ArgMinOp<float>>(per_thread<ArgMinOp<float>>(vi, threads));
    auto [vmax, imax] = kernels::max(t, 0);
    auto [vmin, imin] = kernels::min(t, 0);
    EXPECT_EQ(amax.index, imax.item<int64_t>()) << "trial " << trial;
    EXPECT_EQ(amin.index, imin.item<int64_t>()) << "trial " << trial;
    const float m = emulate_block_reduce<MaxOp<float>>(per_thread<MaxOp<float>>(x, threads));
    const float cpu = kernels::amax(t, {}).item<float>();
    if (std::isnan(cpu))
      EXPECT_TRUE(std::isnan(m));
    else
      EXPECT_EQ(m, cpu);
  }
}

TEST(BlockReduce, EmulatedWelfordGivesTheCpuVariance) {
  std::mt19937 rng(6);
  for (int n : {2, 7, 100, 4096, 50000}) {
    std::vector<float> x(static_cast<size_t>(n));
    std::uniform_real_distribution<float> d(-3.f, 5.f);
    for (float& v : x) v = d(rng) + 1000.f;  // a large mean: naive sum of squares would lose it
    std::vector<WelfordState<float>> threads(256, WelfordOp<float>::identity());
    for (size_t i = 0; i < x.size(); ++i) threads[i % 256] = WelfordOp<float>::push(threads[i % 256], x[i]);
    const auto w = emulate_block_reduce<WelfordOp<float>>(threads);
    const double var = kernels::var(from_vector<float>(x, {n}), {}, 0).item<double>();
    EXPECT_EQ(w.count, static_cast<float>(n));
    EXPECT_NEAR(w.m2 / w.count, var, 2e-3 * var + 1e-4) << "n " << n;
  }
}

TEST(BlockReduce, OnlineSoftmaxStateGivesTheCpuLogSumExp) {
  std::mt19937 rng(7);
  for (int n : {1, 5, 33, 768, 50304}) {
    std::vector<float> x(static_cast<size_t>(n));
    std::normal_distribution<float> d(0.f, 4.f);
    for (float& v : x) v = d(rng);
    if (n > 5) x[3] = -std::numeric_limits<float>::infinity();
    std::vector<SoftmaxState<float>> threads(128, OnlineSoftmaxOp<float>::identity());
    for (size_t i = 0; i < x.size(); ++i) threads[i % 128] = OnlineSoftmaxOp<float>::push(threads[i % 128], x[i]);
    const auto s = emulate_block_reduce<OnlineSoftmaxOp<float>>(threads);
    const double lse = kernels::logsumexp(from_vector<float>(x, {n}), {}).item<double>();
    EXPECT_NEAR(s.max + std::log(s.sum), lse, 1e-5 * std::fabs(lse) + 1e-5) << "n " << n;
  }
  // A row of only -inf: sum stays 0 (normalising gives NaN, as on the CPU).
  std::vector<SoftmaxState<float>> t(32, OnlineSoftmaxOp<float>::identity());
  t[3] = OnlineSoftmaxOp<float>::push(t[3], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(emulate_block_reduce<OnlineSoftmaxOp<float>>(t).sum, 0.f);
}
