// Transforms: Normalize per channel, RandomCrop with zero padding, RandomHorizontalFlip,
// Compose, and TransformDataset: draws depend only on (seed, epoch, index), so loaders
// with any worker count give identical batches.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <set>

using namespace brisk;
using namespace brisk::data;

namespace {

// (C, H, W) f32 with value 100 c + 10 y + x.
Tensor grid(int64_t C, int64_t H, int64_t W) {
  std::vector<float> v;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) v.push_back(static_cast<float>(100 * c + 10 * y + x));
  return from_vector<float>(v, {C, H, W});
}

}  // namespace

TEST(Transforms, NormalizeSubtractsMeanAndDividesByStdPerChannel) {
  Normalize n({1.0, 2.0}, {2.0, 4.0});
  Tensor x = grid(2, 2, 2);
  auto y = n(x, {}).to_vector<float>();
  auto xv = x.to_vector<float>();
  for (size_t i = 0; i < 8; ++i) {
    const float m = i < 4 ? 1.0f : 2.0f, s = i < 4 ? 2.0f : 4.0f;
    EXPECT_FLOAT_EQ(y[i], (xv[i] - m) / s);
  }
  EXPECT_EQ(n(x, {}).sizes(), x.sizes());
  EXPECT_EQ(x.to_vector<float>(), xv);  // input untouched
}

TEST(Transforms, NormalizeOneValueAppliesToAllChannelsAndChecksArguments) {
  auto y = Normalize({0.5}, {0.5})(grid(3, 1, 1), {}).to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{-1.0f, 199.0f, 399.0f}));
  EXPECT_THROW(Normalize({0.5, 0.5}, {0.5}), Error);
  EXPECT_THROW(Normalize({0.5}, {0.0}), Error);
  EXPECT_THROW(Normalize({1, 2}, {1, 2})(grid(3, 2, 2), {}), Error);
  EXPECT_THROW(Normalize({1}, {1})(arange(4).view({1, 2, 2}), {}), Error);  // integer sample
}

TEST(Transforms, RandomCropIsAWindowOfTheZeroPaddedSample) {
  const int64_t C = 2, H = 5, W = 6, size = 4, pad = 2;
  RandomCrop crop(size, pad, 7);
  Tensor x = grid(C, H, W);
  auto xv = x.to_vector<float>();
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t index = 0; index < 40; ++index) {
    Tensor y = crop(x, {0, index});
    ASSERT_EQ(y.sizes(), (Shape{C, size, size}));
    auto yv = y.to_vector<float>();
    // Find the window (top, left) in padded coordinates that reproduces y.
    bool found = false;
    for (int64_t top = 0; top <= H + 2 * pad - size && !found; ++top)
      for (int64_t left = 0; left <= W + 2 * pad - size && !found; ++left) {
        bool ok = true;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < size; ++i)
            for (int64_t j = 0; j < size; ++j) {
              const int64_t sy = top + i - pad, sx = left + j - pad;
              const float want = (sy < 0 || sy >= H || sx < 0 || sx >= W) ? 0.0f : xv[(c * H + sy) * W + sx];
              ok = ok && yv[(c * size + i) * size + j] == want;
            }
        if (ok) {
          found = true;
          offsets.insert({top, left});
        }
      }
    EXPECT_TRUE(found) << "index " << index;
  }
  EXPECT_GT(offsets.size(), 10u);  // windows vary across samples
}

TEST(Transforms, RandomDrawsDependOnlyOnSeedEpochAndIndex) {
  RandomCrop a(3, 1, 5), b(3, 1, 5), other_seed(3, 1, 6);
  Tensor x = grid(1, 4, 4);
  EXPECT_EQ(a(x, {2, 9}).to_vector<float>(), b(x, {2, 9}).to_vector<float>());
  int differ_epoch = 0, differ_seed = 0;
  for (int64_t i = 0; i < 20; ++i) {
    differ_epoch += a(x, {0, i}).to_vector<float>() != a(x, {1, i}).to_vector<float>();
    differ_seed += a(x, {0, i}).to_vector<float>() != other_seed(x, {0, i}).to_vector<float>();
  }
  EXPECT_GT(differ_epoch, 5);
  EXPECT_GT(differ_seed, 5);
}

TEST(Transforms, RandomCropRejectsWindowsLargerThanThePaddedSample) {
  EXPECT_THROW(RandomCrop(6, 0)(grid(1, 5, 5), {}), Error);
  EXPECT_NO_THROW(RandomCrop(7, 1)(grid(1, 5, 5), {}));
  EXPECT_THROW(RandomCrop(0), Error);
}

TEST(Transforms, HorizontalFlipReversesWidthWithProbabilityP) {
  Tensor x = grid(2, 2, 3);
  auto xv = x.to_vector<float>();
  std::vector<float> flipped;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 2; j >= 0; --j) flipped.push_back(xv[r * 3 + j]);
  EXPECT_EQ(RandomHorizontalFlip(1.0)(x, {}).to_vector<float>(), flipped);
  EXPECT_EQ(RandomHorizontalFlip(0.0)(x, {}).to_vector<float>(), xv);
  RandomHorizontalFlip half(0.5, 3);
  int flips = 0;
  for (int64_t i = 0; i < 1000; ++i) flips += half(x, {0, i}).to_vector<float>() == flipped;
  EXPECT_GT(flips, 430);
  EXPECT_LT(flips, 570);
}

TEST(Transforms, ComposeAppliesInOrder) {
  Compose c(RandomHorizontalFlip(1.0), Normalize({1.0}, {2.0}));
  auto y = c(grid(1, 1, 3), {}).to_vector<float>();
  EXPECT_EQ(y, (std::vector<float>{0.5f, 0.0f, -0.5f}));  // [2, 1, 0] then (v - 1) / 2
  const Compose& copy = c;                                // copies, does not nest
  EXPECT_EQ(copy(grid(1, 1, 3), {}).to_vector<float>(), y);
}

TEST(Transforms, TransformDatasetAugmentsPerEpochAndIndex) {
  std::vector<float> v(size_t{8} * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  TensorDataset base(from_vector<float>(v, {8, 1, 4, 4}), arange(8));
  TransformDataset ds(base, Compose(RandomCrop(4, 2, 1), RandomHorizontalFlip(0.5, 1)));
  Example e = ds.get(3);
  EXPECT_EQ(e.target.item<int64_t>(), 3);
  EXPECT_EQ(e.data.sizes(), (Shape{1, 4, 4}));
  // get_batch agrees with get, sample by sample.
  Batch b = ds.get_batch({3, 5});
  EXPECT_EQ(b.data.select(0, 0).to_vector<float>(), e.data.to_vector<float>());
  EXPECT_EQ(b.data.select(0, 1).to_vector<float>(), ds.get(5).data.to_vector<float>());
  ds.set_epoch(1);
  int changed = 0;
  for (int64_t i = 0; i < 8; ++i) {
    auto now = ds.get(i).data.to_vector<float>();
    ds.set_epoch(0);
    changed += now != ds.get(i).data.to_vector<float>();
    ds.set_epoch(1);
  }
  EXPECT_GT(changed, 2);
}

TEST(Transforms, LoaderResultsDoNotDependOnWorkerCount) {
  std::vector<float> v(size_t{40} * 9);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97);
  auto ds = std::make_shared<TransformDataset>(
      std::make_shared<TensorDataset>(from_vector<float>(v, {40, 1, 3, 3}), arange(40)),
      std::make_shared<Compose>(RandomCrop(3, 1, 2), RandomHorizontalFlip()));
  std::vector<std::vector<float>> ref;
  for (int64_t workers : {0, 2, 3}) {
    DataLoader loader(ds, {.batch_size = 7, .shuffle = true, .num_workers = workers, .seed = 4});
    std::vector<std::vector<float>> got;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (auto& [x, y] : loader) got.push_back(x.to_vector<float>());
    if (workers == 0)
      ref = got;
    else
      EXPECT_EQ(got, ref) << "num_workers " << workers;
  }
  EXPECT_NE(ref[0], ref[6]);  // epochs differ (6 batches per epoch)
}
