// Samplers: sequential and seeded random orders, DistributedSampler exactly as PyTorch's
// (padding by the head, cutting the tail, rank r takes order[r::world]), batching.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <algorithm>
#include <numeric>

using namespace brisk;
using namespace brisk::data;
using V = std::vector<int64_t>;

namespace {

V perm(int64_t n, uint64_t seed) {
  Generator g(seed);
  return randperm(n, &g).to_vector<int64_t>();
}

V stride_take(const V& v, size_t start, size_t step) {
  V out;
  for (size_t i = start; i < v.size(); i += step) out.push_back(v[i]);
  return out;
}

}  // namespace

TEST(Sampler, SequentialVisitsIndicesInOrder) {
  SequentialSampler s(5);
  EXPECT_EQ(s.indices(0), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.indices(7), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(s.size(), 5);
}

TEST(Sampler, RandomIsRandpermSeededBySeedPlusEpoch) {
  RandomSampler s(20, 5);
  EXPECT_EQ(s.indices(0), perm(20, 5));
  EXPECT_EQ(s.indices(3), perm(20, 8));
  EXPECT_NE(s.indices(0), s.indices(1));
  V sorted = s.indices(2);
  std::sort(sorted.begin(), sorted.end());
  V iota(20);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
}

TEST(Sampler, SetEpochReshuffles) {
  RandomSampler s(10, 1);
  V first = s.current_indices();
  s.set_epoch(1);
  EXPECT_EQ(s.current_indices(), perm(10, 2));
  EXPECT_NE(s.current_indices(), first);
}

TEST(DistributedSampler, PadsWithTheHeadAndInterleavesRanks) {
  // size 10, world 3: the permutation padded to 12 with its first two entries.
  const V p = perm(10, 0 + 4);
  V padded = p;
  padded.push_back(p[0]);
  padded.push_back(p[1]);
  for (int64_t r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, /*shuffle=*/true, /*seed=*/0, /*drop_last=*/false);
    EXPECT_EQ(s.size(), 4);
    EXPECT_EQ(s.total_size(), 12);
    EXPECT_EQ(s.indices(4), stride_take(padded, static_cast<size_t>(r), 3)) << "rank " << r;
  }
}

TEST(DistributedSampler, DropLastCutsTheTail) {
  const V p = perm(10, 7);
  V cut(p.begin(), p.begin() + 9);
  for (int64_t r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, true, 7, /*drop_last=*/true);
    EXPECT_TRUE(s.drop_last());
    EXPECT_EQ(s.size(), 3);
    EXPECT_EQ(s.indices(0), stride_take(cut, static_cast<size_t>(r), 3));
  }
}

TEST(DistributedSampler, WithoutShuffleRanksTakeInterleavedRange) {
  DistributedSampler r0(10, 3, 0, false), r1(10, 3, 1, false), r2(10, 3, 2, false);
  EXPECT_EQ(r0.indices(0), (V{0, 3, 6, 9}));
  EXPECT_EQ(r1.indices(0), (V{1, 4, 7, 0}));
  EXPECT_EQ(r2.indices(0), (V{2, 5, 8, 1}));
}

TEST(DistributedSampler, RanksTogetherCoverTheDatasetEachEpoch) {
  for (uint64_t epoch : {0, 1, 2}) {
    V all;
    for (int64_t r = 0; r < 4; ++r) {
      V mine = DistributedSampler(16, 4, r, true, 3).indices(epoch);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    V iota(16);
    std::iota(iota.begin(), iota.end(), 0);
    EXPECT_EQ(all, iota);
  }
  EXPECT_NE(DistributedSampler(16, 4, 0, true, 3).indices(0), DistributedSampler(16, 4, 0, true, 3).indices(1));
}

TEST(DistributedSampler, PaddingCyclesWhenDatasetIsSmallerThanWorld) {
  // size 2, world 5, no shuffle: [0, 1] -> [0, 1, 0, 1, 0].
  V got;
  for (int64_t r = 0; r < 5; ++r) got.push_back(DistributedSampler(2, 5, r, false).indices(0).at(0));
  EXPECT_EQ(got, (V{0, 1, 0, 1, 0}));
}

TEST(DistributedSampler, RejectsBadRankAndWorld) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), Error);
  EXPECT_THROW(DistributedSampler(10, 2, 2), Error);
  EXPECT_THROW(DistributedSampler(10, 2, -1), Error);
  try {
    DistributedSampler(10, 2, 3);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DistributedSampler: rank 3 out of range [0, 2)"), std::string::npos);
  }
}

TEST(BatchSampler, GroupsIndicesKeepingOrDroppingTheShortLastBatch) {
  auto seq = std::make_shared<SequentialSampler>(7);
  BatchSampler keep(seq, 3, false), drop(seq, 3, true);
  EXPECT_EQ(keep.batches(0), (std::vector<V>{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(keep.size(), 3);
  EXPECT_EQ(drop.batches(0), (std::vector<V>{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(drop.size(), 2);
  EXPECT_THROW(BatchSampler(seq, 0), Error);
}

TEST(BatchSampler, FollowsTheWrappedSamplersEpoch) {
  auto rnd = std::make_shared<RandomSampler>(6, 9);
  BatchSampler b(rnd, 2);
  V flat;
  for (const V& batch : b.batches(1)) flat.insert(flat.end(), batch.begin(), batch.end());
  EXPECT_EQ(flat, perm(6, 10));
}
