// Host checks of the GPU topk (device/topk.h), no GPU needed: the order keys follow the CPU
// topk's order (NaN largest, -0 == +0, ties by index), the bitonic network over (key, index)
// items picks exactly what the CPU picks, and the kernels' launch schedule (shared-memory tiles
// for small strides, global steps for large ones) runs every step of the network once, in order.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/device/reduce_plan.h>
#include <brisk/kernels/device/topk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/reduce.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

using namespace brisk;
namespace K = brisk::kernels;
namespace kd = brisk::kernels::device;

namespace {

// Uniform values in [lo, hi) from `seed`.
Tensor random(const Shape& s, uint64_t seed, double lo, double hi) {
  Generator gen(seed);
  std::vector<double> v = rand(s, {.dtype = DType::F64}, &gen).to_vector<double>();
  for (double& x : v) x = lo + (hi - lo) * x;
  return from_vector<double>(v, s);
}

bool topk_same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

}  // namespace

namespace {

// The CPU topk's order on values: NaN is the largest, equal values (and -0, +0) tie.
template <class A>
int cpu_compare(A a, A b) {
  const bool an = kd::is_nan_value(a), bn = kd::is_nan_value(b);
  if (an || bn) return an == bn ? 0 : (an ? 1 : -1);
  return a < b ? -1 : (b < a ? 1 : 0);
}

template <class T>
void expect_keys_follow_cpu_order(const std::vector<T>& values) {
  for (T a : values)
    for (T b : values) {
      const int c = cpu_compare(kd::to_acc(a), kd::to_acc(b));
      const auto ka = kd::order_key(a), kb = kd::order_key(b);
      EXPECT_EQ(c < 0, ka < kb) << static_cast<double>(kd::to_acc(a)) << " vs " << static_cast<double>(kd::to_acc(b));
      EXPECT_EQ(c == 0, ka == kb) << static_cast<double>(kd::to_acc(a)) << " vs " << static_cast<double>(kd::to_acc(b));
    }
}

// topk of every row of a contiguous (rows, n) x through items and the bitonic network.
template <class T>
void check_topk_by_network(const Tensor& x, int64_t k, bool largest, bool sorted) {
  using Key = kd::topk_key_t<T>;
  using Item = kd::TopkItem<Key>;
  const int64_t rows = x.size(0), n = x.size(1), len = kd::pow2_ceil(n);
  const T* px = static_cast<const T*>(x.data_ptr());
  std::vector<Item> items(static_cast<size_t>(rows * len));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < len; ++i)
      items[r * len + i] =
          i < n ? kd::topk_item(px[r * n + i], static_cast<uint32_t>(i), largest) : kd::pad_item<Key>();
  kd::bitonic_sort_reference(items, len);
  std::vector<Item> chosen = items;
  int64_t chosen_len = len;
  if (!sorted && k > 1) {
    chosen_len = kd::pow2_ceil(k);
    chosen.assign(static_cast<size_t>(rows * chosen_len), kd::pad_item<Key>());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < k; ++i) chosen[r * chosen_len + i] = kd::index_item<Key>(items[r * len + i].index);
    kd::bitonic_sort_reference(chosen, chosen_len);
  }
  const ValuesIndices want = K::topk(x, k, -1, largest, sorted);
  const std::vector<double> wv = want.values.to_vector<double>(), wi = want.indices.to_vector<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const uint32_t idx = chosen[r * chosen_len + i].index;
      ASSERT_LT(idx, static_cast<uint32_t>(n));
      EXPECT_EQ(static_cast<double>(idx), wi[r * k + i]) << "topk n " << n << " k " << k << " largest " << largest
                                                         << " sorted " << sorted << " row " << r << " #" << i;
      EXPECT_TRUE(topk_same_value(static_cast<double>(kd::to_acc(px[r * n + idx])), wv[r * k + i]));
    }
}

}  // namespace

TEST(DeviceTopk, OrderKeysFollowTheCpuOrderIncludingNaNZerosAndInfinities) {
  const float finf = std::numeric_limits<float>::infinity(), fnan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> f = {-finf, -3.5f, -1.0f, -1e-40f, -0.0f, 0.0f, 1e-40f, 1.0f, 2.5f, finf, fnan, -fnan};
  expect_keys_follow_cpu_order(f);
  std::vector<double> d;
  d.reserve(f.size());
  for (float v : f) d.push_back(v);
  d.push_back(1e300);
  d.push_back(-1e300);
  expect_keys_follow_cpu_order(d);
  std::vector<Half> h;
  h.reserve(f.size());
  for (float v : f) h.emplace_back(v);
  expect_keys_follow_cpu_order(h);
  std::vector<BFloat16> b;
  b.reserve(f.size());
  for (float v : f) b.emplace_back(v);
  expect_keys_follow_cpu_order(b);
  expect_keys_follow_cpu_order(
      std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -5, -1, 0, 1, 7, std::numeric_limits<int32_t>::max()});
  expect_keys_follow_cpu_order(
      std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -5, 0, 3, std::numeric_limits<int64_t>::max()});
  expect_keys_follow_cpu_order(std::vector<uint8_t>{0, 1, 127, 128, 255});
}

TEST(DeviceTopk, TheSortingNetworkPicksWhatTheCpuPicksWithTiesAndNaN) {
  for (int64_t n : {1, 2, 3, 5, 31, 33, 100, 1000}) {
    // Few distinct values (ties), and NaN in some rows.
    Tensor base = random({4, n}, static_cast<uint64_t>(n), 0, 5);
    std::vector<double> v = base.to_vector<double>();
    for (size_t i = 0; i < v.size(); i += 7)
      if (i / n >= 2) v[i] = std::nan("");
    Tensor x64 = from_vector<double>(v, {4, n});
    for (int64_t k : {int64_t{1}, (n + 1) / 2, n}) {
      for (bool largest : {true, false}) {
        for (bool sorted : {true, false}) {
          check_topk_by_network<float>(K::cast(x64, DType::F32), k, largest, sorted);
          check_topk_by_network<Half>(K::cast(x64, DType::F16), k, largest, sorted);
          check_topk_by_network<double>(x64, k, largest, sorted);
          check_topk_by_network<int32_t>(K::cast(base, DType::I32), k, largest, sorted);
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

TEST(DeviceTopk, TheLaunchScheduleRunsEveryStepOnceInOrderWithinTiles) {
  for (int64_t tile : {32, 1024, 4096}) {
    for (int64_t len = 1; len <= (int64_t{1} << 15); len *= 2) {
      std::vector<std::pair<int64_t, int64_t>> want, got;
      for (int64_t size = 2; size <= len; size *= 2)
        for (int64_t stride = size / 2; stride > 0; stride /= 2) want.emplace_back(size, stride);
      for (const kd::BitonicLaunch& l : kd::bitonic_schedule(len, tile)) {
        if (l.tile) {
          for (int64_t size = l.size_first; size <= l.size_last; size *= 2)
            for (int64_t stride = std::min(size, tile) / 2; stride > 0; stride /= 2) got.emplace_back(size, stride);
        } else {
          EXPECT_GE(l.stride, tile);
          got.emplace_back(l.size_first, l.stride);
        }
      }
      EXPECT_EQ(got, want) << "row length " << len << ", tile " << tile;
    }
  }
}

TEST(DeviceTopk, TiledSortOfSeveralRowsEqualsTheWholeNetwork) {
  // The kernels' decomposition: tiles of `tile` items (the last one partial) for the small
  // strides, whole-array steps for the others; rows of `len` side by side.
  for (int64_t tile : {32, 256}) {
    for (int64_t len : {2, 8, 32, 64, 1024}) {
      for (int64_t rows : {1, 3, 5}) {
        using Item = kd::TopkItem<uint32_t>;
        const int64_t total = rows * len, t = std::min(tile, kd::pow2_ceil(total));
        Generator gen(static_cast<uint64_t>(len * 10 + rows));
        std::vector<double> u = rand({total}, {.dtype = DType::F64}, &gen).to_vector<double>();
        std::vector<Item> a(static_cast<size_t>(total));
        for (int64_t i = 0; i < total; ++i) a[i] = {static_cast<uint32_t>(u[i] * 20), static_cast<uint32_t>(i % len)};
        std::vector<Item> b = a;
        kd::bitonic_sort_reference(a, len);
        for (const kd::BitonicLaunch& l : kd::bitonic_schedule(len, t)) {
          if (l.tile) {
            for (int64_t base = 0; base < total; base += t) {
              const int64_t count = std::min(t, total - base);
              for (int64_t size = l.size_first; size <= l.size_last; size *= 2)
                for (int64_t stride = std::min(size, t) / 2; stride > 0; stride /= 2)
                  for (int64_t p = 0; p < t / 2; ++p) {
                    const int64_t lo = kd::bitonic_lo(p, stride);
                    if (lo + stride < count)
                      kd::compare_exchange(b[base + lo], b[base + lo + stride],
                                           kd::bitonic_ascending(base + lo, size, len));
                  }
            }
          } else {
            for (int64_t p = 0; p < total / 2; ++p) {
              const int64_t lo = kd::bitonic_lo(p, l.stride);
              kd::compare_exchange(b[lo], b[lo + l.stride], kd::bitonic_ascending(lo, l.size_first, len));
            }
          }
        }
        for (int64_t i = 0; i < total; ++i) {
          ASSERT_EQ(a[i].key, b[i].key) << "tile " << t << " len " << len << " rows " << rows << " at " << i;
          ASSERT_EQ(a[i].index, b[i].index);
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 1; i < len; ++i) ASSERT_FALSE(kd::item_less(a[r * len + i], a[r * len + i - 1]));
      }
    }
  }
}
