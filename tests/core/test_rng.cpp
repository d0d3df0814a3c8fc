// Random numbers: Philox-4x32-10 against the published Random123 known answers, and the
// factories built on it (seeding, thread-count independence, ranges, distributions).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include <brisk/core/rng.h>
#include <brisk/kernels/factory.h>

using namespace brisk;

namespace {

// Philox4x32-10 written out from the Random123 paper with a full 4-word counter, to check
// brisk's block() (which puts a 64-bit counter in words 0, 1 and zeros in words 2, 3).
std::array<uint32_t, 4> reference_philox(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += 0x9E3779B9u;  // golden ratio
      k[1] += 0xBB67AE85u;  // sqrt(3) - 1
    }
    uint64_t p0 = uint64_t{0xD2511F53u} * c[0], p1 = uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

std::array<uint32_t, 4> brisk_block(uint64_t seed, uint64_t ctr) {
  std::array<uint32_t, 4> out{};
  Philox::block(seed, ctr, out.data());
  return out;
}

}  // namespace

TEST(Philox, ReferenceMatchesRandom123KnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(reference_philox({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(reference_philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(reference_philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, BlockWithZeroCounterAndKeyGivesThePublishedAnswer) {
  EXPECT_EQ(brisk_block(0, 0), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(Philox, BlockPutsTheCounterInWordsZeroAndOneAndTheSeedInTheKey) {
  const uint64_t seeds[] = {1, 0x5eed, 0x243f6a8885a308d3ull, ~0ull};
  const uint64_t ctrs[] = {1, 2, 12345, 0x13198a2e03707344ull, ~0ull};
  for (uint64_t s : seeds)
    for (uint64_t c : ctrs)
      EXPECT_EQ(brisk_block(s, c), reference_philox({static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0, 0},
                                                    {static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32)}))
          << "seed " << s << " counter " << c;
}

TEST(Philox, UnitConversionsStayBelowOne) {
  EXPECT_EQ(Philox::to_unit_float(0), 0.0f);
  EXPECT_LT(Philox::to_unit_float(0xffffffffu), 1.0f);
  EXPECT_EQ(Philox::to_unit_double(0, 0), 0.0);
  EXPECT_LT(Philox::to_unit_double(0xffffffffu, 0xffffffffu), 1.0);
}

TEST(Generator, ReserveHandsOutConsecutiveCounters) {
  Generator g(9);
  EXPECT_EQ(g.seed(), 9u);
  EXPECT_EQ(g.reserve(10), 0u);
  EXPECT_EQ(g.reserve(5), 10u);
  EXPECT_EQ(g.state().offset, 15u);
  g.manual_seed(11);
  EXPECT_EQ(g.state().seed, 11u);
  EXPECT_EQ(g.state().offset, 0u);
}

TEST(Random, SameSeedGivesTheSameValues) {
  manual_seed(42);
  auto a = randn({1000}).to_vector<float>();
  auto b = randn({1000}).to_vector<float>();
  EXPECT_NE(a, b) << "the second draw continues the stream";
  manual_seed(42);
  EXPECT_EQ(randn({1000}).to_vector<float>(), a);
  EXPECT_EQ(randn({1000}).to_vector<float>(), b);
  manual_seed(43);
  EXPECT_NE(randn({1000}).to_vector<float>(), a);
}

TEST(Random, ValuesDependOnlyOnSeedAndPosition) {
  // Two draws of 10 give the same numbers as one draw of 20.
  Generator g1(5), g2(5);
  auto whole = rand({20}, {.dtype = DType::F64}, &g1).to_vector<double>();
  auto first = rand({10}, {.dtype = DType::F64}, &g2).to_vector<double>();
  auto second = rand({2, 5}, {.dtype = DType::F64}, &g2).to_vector<double>();
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, whole);
}

TEST(Random, ValuesDoNotDependOnTheThreadCount) {
  const int saved = omp_get_max_threads();
  const Shape big{300'000};  // large enough for the parallel path
  auto draw = [&](int threads) {
    omp_set_num_threads(threads);
    Generator g(2024);
    std::vector<std::vector<double>> out;
    out.push_back(rand(big, {}, &g).to_vector<double>());
    out.push_back(randn(big, {.dtype = DType::BF16}, &g).to_vector<double>());
    out.push_back(randint(-5, 100, big, {}, &g).to_vector<double>());
    return out;
  };
  auto one = draw(1), two = draw(2), three = draw(3);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

TEST(Random, RandIsInZeroOneForEveryFloatDType) {
  Generator g(1);
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    auto v = rand({1 << 20}, {.dtype = dt}, &g).to_vector<double>();
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*lo, 0.0) << dt;
    EXPECT_LT(*hi, 1.0) << dt;
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    EXPECT_NEAR(mean, 0.5, 0.01) << dt;
  }
}

TEST(Random, UniformFillsTheRequestedRange) {
  Generator g(3);
  Tensor t = empty({100'000}, DType::F64);
  uniform_(t, -2.0, 3.0, &g);
  auto v = t.to_vector<double>();
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_GE(*lo, -2.0);
  EXPECT_LT(*hi, 3.0);
  EXPECT_LT(*lo, -1.99);
  EXPECT_GT(*hi, 2.99);
  EXPECT_THROW(uniform_(t, 1.0, 0.0, &g), Error);
  EXPECT_THROW(uniform_(empty({3}, DType::I64), 0.0, 1.0, &g), Error);
}

TEST(Random, RandnHasMeanZeroAndStdOne) {
  Generator g(7);
  auto v = randn({1'000'000}, {.dtype = DType::F64}, &g).to_vector<double>();
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size());
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(std::sqrt(var), 1.0, 0.005);
  // About 68.3% within one std, 95.4% within two.
  double within1 = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x) < 1; }) / 1e6;
  double within2 = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x) < 2; }) / 1e6;
  EXPECT_NEAR(within1, 0.6827, 0.003);
  EXPECT_NEAR(within2, 0.9545, 0.002);
  for (double x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST(Random, NormalShiftsAndScales) {
  Generator g(8);
  Tensor t = empty({200'000}, DType::F32);
  normal_(t, 3.0, 0.5, &g);
  auto v = t.to_vector<double>();
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  EXPECT_NEAR(mean, 3.0, 0.01);
  EXPECT_THROW(normal_(t, 0.0, -1.0, &g), Error);
}

TEST(Random, RandintCoversExactlyTheHalfOpenRange) {
  Generator g(11);
  auto v = randint(-3, 4, {10'000}, {}, &g).to_vector<int64_t>();
  std::set<int64_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  Tensor t32 = randint(0, 10, {5}, {.dtype = DType::I32}, &g);
  EXPECT_EQ(t32.dtype(), DType::I32);
  for (int32_t x : t32.to_vector<int32_t>()) EXPECT_TRUE(x >= 0 && x < 10);
  try {
    randint(5, 5, {2}, {}, &g);
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("randint"), std::string::npos) << e.what();
  }
}

TEST(Random, RandpermIsAPermutation) {
  Generator g(13);
  for (int64_t n : {0, 1, 2, 10, 1000}) {
    Tensor p = randperm(n, &g);
    EXPECT_EQ(p.dtype(), DType::I64);
    auto v = p.to_vector<int64_t>();
    std::vector<int64_t> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expected(static_cast<size_t>(n));
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(sorted, expected) << n;
    if (n == 1000) {
      EXPECT_NE(v, expected) << "shuffled";
    }
  }
  Generator a(99), b(99);
  EXPECT_EQ(randperm(50, &a).to_vector<int64_t>(), randperm(50, &b).to_vector<int64_t>());
  EXPECT_THROW(randperm(-1, &g), Error);
}

TEST(Random, GeneratorStateSaveAndRestoreReproducesTheStream) {
  Generator g(21);
  rand({17}, {}, &g);
  Generator::State saved = g.state();
  auto x = randn({64}, {}, &g).to_vector<float>();
  auto y = randint(0, 1000, {8}, {}, &g).to_vector<int64_t>();
  g.set_state(saved);
  EXPECT_EQ(randn({64}, {}, &g).to_vector<float>(), x);
  EXPECT_EQ(randint(0, 1000, {8}, {}, &g).to_vector<int64_t>(), y);
  Generator other;
  other.set_state(saved);  // a state moves between generators
  EXPECT_EQ(randn({64}, {}, &other).to_vector<float>(), x);
}

TEST(Random, ExplicitGeneratorLeavesTheDefaultOneAlone) {
  manual_seed(5);
  auto before = default_generator().state();
  Generator g(1);
  rand({100}, {}, &g);
  EXPECT_EQ(default_generator().state().offset, before.offset);
  rand({100});
  EXPECT_EQ(default_generator().state().offset, before.offset + 100);
}
