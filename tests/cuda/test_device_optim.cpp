// Host checks of the optimizer kernels' launch plan (brisk/kernels/device/multi_tensor.h): every
// element of every tensor is visited exactly once, by exactly one block and one thread, within the
// per-launch limits, whatever the mix of tensor sizes; and the reductions, emulated on the host
// in the device's order (per-thread loops, block trees, the final combine), agree with the CPU.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/device/multi_tensor.h>
#include <brisk/kernels/device/optim.h>
#include <brisk/kernels/device/reduce.h>
#include <brisk/kernels/device/vec.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/optim.h>

#include <cmath>
#include <map>
#include <vector>

using namespace brisk;
namespace dev = brisk::kernels::device;

namespace {

// One block of a planned launch, resolved to the tensor it works on.
struct PlannedBlock {
  int64_t tensor, chunk, global_block;
};

// Runs the plan for tensors of the given sizes; fake addresses encode (list, tensor) so the
// test can check that every slot carries the right tensor's pointers in every list.
template <int Depth>
std::vector<PlannedBlock> plan(const std::vector<int64_t>& sizes, int64_t chunk, int* launches = nullptr) {
  std::vector<PlannedBlock> out;
  int64_t expected_first = 0;
  int n_launches = 0;
  // Fake addresses that the plan only copies and the test compares.
  auto fake = [](int d, int64_t t) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    return reinterpret_cast<void*>(static_cast<uintptr_t>((t + 1) * 4096 + int64_t{d} * 16));
  };
  dev::plan_multi_tensor<Depth>(
      static_cast<int64_t>(sizes.size()), [&](int64_t t) { return sizes[static_cast<size_t>(t)]; }, fake, chunk,
      [&](const dev::TensorListMeta<Depth>& meta, int blocks, const int64_t* slot_tensor) {
        ++n_launches;
        EXPECT_GE(blocks, 1);
        EXPECT_LE(blocks, dev::TensorListMeta<Depth>::kMaxBlocks);
        EXPECT_EQ(meta.first_block, expected_first) << "partials must be numbered without gaps";
        int slots_used = 0;
        for (int b = 0; b < blocks; ++b) slots_used = std::max(slots_used, meta.block_slot[b] + 1);
        EXPECT_LE(slots_used, dev::TensorListMeta<Depth>::kMaxTensors);
        for (int s = 0; s < slots_used; ++s) {
          const int64_t t = slot_tensor[s];
          EXPECT_EQ(meta.numel[s], sizes[static_cast<size_t>(t)]);
          for (int d = 0; d < Depth; ++d) EXPECT_EQ(meta.addr[d][s], fake(d, t)) << "list " << d << " slot " << s;
        }
        for (int b = 0; b < blocks; ++b)
          out.push_back({slot_tensor[meta.block_slot[b]], meta.block_chunk[b], meta.first_block + b});
        expected_first += blocks;
      });
  if (launches) *launches = n_launches;
  return out;
}

// Every (tensor, chunk) exactly once, in order, and block numbers 0, 1, 2, ...
void expect_covers(const std::vector<PlannedBlock>& blocks, const std::vector<int64_t>& sizes, int64_t chunk) {
  std::map<std::pair<int64_t, int64_t>, int> seen;
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].global_block, static_cast<int64_t>(i));
    ++seen[{blocks[i].tensor, blocks[i].chunk}];
  }
  size_t want = 0;
  for (size_t t = 0; t < sizes.size(); ++t)
    for (int64_t c = 0; c < dev::chunks_of(sizes[t], chunk); ++c, ++want)
      EXPECT_EQ((seen[{static_cast<int64_t>(t), c}]), 1) << "tensor " << t << " chunk " << c;
  EXPECT_EQ(blocks.size(), want);
  EXPECT_EQ(dev::multi_tensor_blocks(
                static_cast<int64_t>(sizes.size()), [&](int64_t t) { return sizes[static_cast<size_t>(t)]; }, chunk),
            static_cast<int64_t>(want));
}

template <int Depth>
void check_plan(const std::vector<int64_t>& sizes, int64_t chunk, int expected_launches = -1) {
  int launches = 0;
  std::vector<PlannedBlock> blocks = plan<Depth>(sizes, chunk, &launches);
  expect_covers(blocks, sizes, chunk);
  if (expected_launches >= 0) {
    EXPECT_EQ(launches, expected_launches);
  }
}

}  // namespace

TEST(DeviceOptim, PlanCoversEveryChunkOnceForOddSizes) {
  const std::vector<int64_t> sizes = {0, 1, 7, 65536, 65537, 3 * 65536 + 5, 0, 1000, 1};
  check_plan<1>(sizes, dev::kMultiTensorChunk, 1);
  check_plan<2>(sizes, dev::kMultiTensorChunk, 1);
  check_plan<5>(sizes, dev::kMultiTensorChunk, 1);
  check_plan<3>({}, dev::kMultiTensorChunk, 0);
  check_plan<3>({0, 0}, dev::kMultiTensorChunk, 0);
}

TEST(DeviceOptim, ManySmallTensorsSplitAtTheTensorLimit) {
  for (int n : {47, 48, 49, 110, 111, 300}) {
    std::vector<int64_t> sizes(static_cast<size_t>(n), 3);
    const int per4 = dev::TensorListMeta<4>::kMaxTensors, per1 = dev::TensorListMeta<1>::kMaxTensors;
    check_plan<4>(sizes, dev::kMultiTensorChunk, (n + per4 - 1) / per4);
    check_plan<1>(sizes, dev::kMultiTensorChunk, (n + per1 - 1) / per1);
  }
}

TEST(DeviceOptim, ALongTensorContinuesAcrossLaunches) {
  // 1000 chunks of 16 elements: four launches of at most 320 blocks, the tensor carried over.
  check_plan<5>({1000 * 16 - 3}, 16, 4);
  // Around it, tensors that fill the slots while the long one is open.
  std::vector<int64_t> sizes;
  sizes.reserve(100);
  for (int i = 0; i < 100; ++i) sizes.push_back(i % 7 == 0 ? 0 : (i * 37) % 500 + 1);
  sizes.insert(sizes.begin() + 30, 5000 * 16 + 1);
  check_plan<3>(sizes, 16);
  check_plan<1>(sizes, 16);
}

TEST(DeviceOptim, EveryElementIsVisitedOnceByOneThread) {
  // The kernels' walk: per block, whole vectors (when aligned) then the tail, strided by the
  // block size; checked for each vector width and for unaligned operands (scalar only).
  const std::vector<int64_t> sizes = {1, 7, 65536, 65537 + 65536, 8, 9, 0, 3000};
  for (int width : {1, 2, 4, 8}) {
    for (bool aligned : {true, false}) {
      std::vector<std::vector<int>> hits;
      hits.reserve(sizes.size());
      for (int64_t n : sizes) hits.emplace_back(static_cast<size_t>(n), 0);
      for (const PlannedBlock& b : plan<2>(sizes, dev::kMultiTensorChunk)) {
        const auto r = dev::chunk_range(sizes[static_cast<size_t>(b.tensor)], b.chunk, dev::kMultiTensorChunk);
        const auto s = dev::chunk_split(r, width, aligned);
        EXPECT_EQ(r.begin % width, 0) << "chunks start vector-aligned";
        auto& h = hits[static_cast<size_t>(b.tensor)];
        for (int t = 0; t < dev::kMultiTensorThreads; ++t) {
          for (int64_t v = t; v < s.vectors; v += dev::kMultiTensorThreads)
            for (int l = 0; l < width; ++l) ++h[static_cast<size_t>(s.begin + v * width + l)];
          for (int64_t i = s.tail_begin + t; i < s.end; i += dev::kMultiTensorThreads) ++h[static_cast<size_t>(i)];
        }
      }
      for (size_t t = 0; t < sizes.size(); ++t)
        for (size_t i = 0; i < hits[t].size(); ++i)
          ASSERT_EQ(hits[t][i], 1) << "width " << width << " aligned " << aligned << " tensor " << t << " element "
                                   << i;
    }
  }
}

namespace {

// What the reduce kernels compute, emulated: per block, each thread's loop in the device's
// order, the block tree, then one block combining the partials.
template <class Op>
double emulate_reduction(const std::vector<std::vector<float>>& data) {
  std::vector<int64_t> sizes;
  sizes.reserve(data.size());
  for (const auto& d : data) sizes.push_back(static_cast<int64_t>(d.size()));
  std::vector<double> partials;
  constexpr int W = dev::vec_width<float>;
  for (const PlannedBlock& b : plan<1>(sizes, dev::kMultiTensorChunk)) {
    const float* x = data[static_cast<size_t>(b.tensor)].data();
    const auto r = dev::chunk_range(sizes[static_cast<size_t>(b.tensor)], b.chunk, dev::kMultiTensorChunk);
    const auto s = dev::chunk_split(r, W, true);
    std::vector<double> threads(dev::kMultiTensorThreads, Op::identity());
    for (int t = 0; t < dev::kMultiTensorThreads; ++t) {
      double acc = Op::identity();
      for (int64_t v = t; v < s.vectors; v += dev::kMultiTensorThreads)
        for (int l = 0; l < W; ++l) acc = Op::push(acc, x[s.begin + v * W + l]);
      for (int64_t i = s.tail_begin + t; i < s.end; i += dev::kMultiTensorThreads) acc = Op::push(acc, x[i]);
      threads[static_cast<size_t>(t)] = acc;
    }
    EXPECT_EQ(b.global_block, static_cast<int64_t>(partials.size()));
    partials.push_back(dev::emulate_block_reduce<Op>(threads));
  }
  std::vector<double> threads(dev::kMultiTensorThreads, Op::identity());
  for (int t = 0; t < dev::kMultiTensorThreads; ++t)
    for (size_t i = static_cast<size_t>(t); i < partials.size(); i += dev::kMultiTensorThreads)
      threads[static_cast<size_t>(t)] = Op::combine(threads[static_cast<size_t>(t)], partials[i]);
  return dev::emulate_block_reduce<Op>(threads);
}

std::vector<std::vector<float>> random_lists(uint64_t seed) {
  Generator gen(seed);
  std::vector<std::vector<float>> out;
  for (int64_t n : {0, 1, 5, 1000, 65536 + 3, 3 * 65536 + 17}) out.push_back(rand({n}, {}, &gen).to_vector<float>());
  for (auto& v : out)
    for (float& x : v) x = 4 * x - 2;
  return out;
}

std::vector<Tensor> as_tensors(const std::vector<std::vector<float>>& data) {
  std::vector<Tensor> ts;
  ts.reserve(data.size());
  for (const auto& d : data) ts.push_back(from_vector<float>(d, {static_cast<int64_t>(d.size())}));
  return ts;
}

}  // namespace

TEST(DeviceOptim, EmulatedSumOfSquaresMatchesTheCpu) {
  const auto data = random_lists(1);
  const double want = kernels::sum_of_squares(as_tensors(data));
  const double got = emulate_reduction<dev::SumSquaresOp>(data);
  EXPECT_NEAR(got, want, 1e-12 * want);
  EXPECT_EQ(emulate_reduction<dev::SumSquaresOp>({}), 0.0);
}

TEST(DeviceOptim, EmulatedMaxAbsMatchesTheCpuAndNanWins) {
  auto data = random_lists(2);
  data[4][70000 - 65536] = -7.5f;
  EXPECT_EQ(emulate_reduction<dev::MaxAbsOp>(data), 7.5);
  EXPECT_EQ(kernels::max_abs(as_tensors(data)), 7.5);
  data[5][3] = NAN;  // early in the last tensor: the CPU must not forget it either
  EXPECT_TRUE(std::isnan(emulate_reduction<dev::MaxAbsOp>(data)));
  EXPECT_TRUE(std::isnan(kernels::max_abs(as_tensors(data))));
  EXPECT_EQ(emulate_reduction<dev::MaxAbsOp>({}), 0.0);
  EXPECT_EQ(kernels::max_abs({}), 0.0);
}

TEST(DeviceOptim, SixteenBitParametersUpdateInF32AndRoundOnce) {
  // The CPU's bf16 Adam step equals the f32 rule applied to the widened values, rounded once.
  std::vector<float> p0 = {0.5f, -1.25f, 3.0f}, g0 = {0.1f, -0.2f, 0.3f};
  auto bf = [](const std::vector<float>& v) { return kernels::cast(from_vector<float>(v, {3}), DType::BF16); };
  const std::vector<float> zero = {0, 0, 0};
  Tensor p = bf(p0), g = bf(g0), m = bf(zero), v = bf(zero);
  kernels::adam_step({p}, {g}, {m}, {v}, {}, {0.01, 0.9, 0.999, 1e-8, 0.1, true, false, false, 1});
  const auto rule = dev::make_adam_rule<float>(0.01, 0.9, 0.999, 1e-8, 0.1, true, false, false, 1);
  const std::vector<float> pw = kernels::cast(bf(p0), DType::F32).to_vector<float>();
  const std::vector<float> gw = kernels::cast(bf(g0), DType::F32).to_vector<float>();
  for (size_t i = 0; i < 3; ++i) {
    float pv = pw[i], mv = 0, vv = 0, unused = 0;
    rule.apply(pv, gw[i], mv, vv, unused);
    EXPECT_EQ(p.to_vector<float>()[i], static_cast<float>(BFloat16(pv))) << i;
    EXPECT_EQ(m.to_vector<float>()[i], static_cast<float>(BFloat16(mv))) << i;
  }
}
