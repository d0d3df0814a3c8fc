// Host checks of the index family's device code (no GPU needed): 64-bit-safe index division,
// multinomial's per-row draws against the CPU kernel's samples, the sorted-run order of the
// deterministic scatter-adds against the CPU's sums bit for bit, and every nn and index case run
// through its CUDA path in recording mode giving the CPU's output shapes and dtypes.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/device/index.h>
#include <brisk/kernels/index.h>
#include <brisk/kernels/nn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "cuda/op_cases.h"

using namespace brisk;
namespace dv = brisk::kernels::device;

TEST(DeviceIndex, IndexDivMatchesIntegerDivisionOnBothPaths) {
  const std::vector<int64_t> divisors = {1, 2, 3, 7, 32, 1000, 50304, (int64_t{1} << 31) - 1, int64_t{1} << 33};
  for (int64_t d : divisors) {
    for (int64_t max : {int64_t{1000}, (int64_t{1} << 31) - 1, int64_t{1} << 40}) {
      const dv::IndexDiv div(d, max);
      EXPECT_EQ(div.narrow, max < (int64_t{1} << 31) && d < (int64_t{1} << 31));
      for (int64_t n : {int64_t{0}, int64_t{1}, d - 1, d, d + 1, 3 * d + 2, max - 1, max / 2 + 5}) {
        if (n < 0 || n >= max) continue;
        int64_t q, r;
        div.divmod(n, q, r);
        ASSERT_EQ(q, n / d) << n << " / " << d << " (max " << max << ")";
        ASSERT_EQ(r, n % d) << n << " % " << d << " (max " << max << ")";
      }
    }
  }
}

TEST(DeviceIndex, MultinomialRowDrawsMatchTheCpuSamples) {
  for (uint64_t seed : {3ull, 1234ull}) {
    for (bool replacement : {true, false}) {
      Generator wg(seed + 1);
      const int64_t rows = 5, n = 40, samples = replacement ? 64 : 12;
      Tensor probs = rand({rows, n}, {.dtype = DType::F64}, &wg);
      // Zero weights, and a row with few live categories, exercise the skips and clamps.
      std::vector<double> w = probs.to_vector<double>();
      for (int64_t i = 0; i < rows * n; i += 3) w[i] = 0;
      for (int64_t i = 2 * n; i < 2 * n + 20; ++i) w[i] = 0;
      probs = from_vector<double>(w, {rows, n});
      Generator gen(seed);
      const std::vector<int64_t> cpu = kernels::multinomial(probs, samples, replacement, &gen).to_vector<int64_t>();
      const uint64_t base = 0;  // a fresh generator's first counter
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> row(w.begin() + r * n, w.begin() + (r + 1) * n);
        const dv::MultinomialRow st = dv::multinomial_row(row.data(), n);
        ASSERT_TRUE(st.valid);
        std::vector<int64_t> got(static_cast<size_t>(samples));
        if (replacement) {
          for (int64_t s = 0; s < samples; ++s) {
            const double u = dv::multinomial_unit(seed, base + static_cast<uint64_t>(r * samples + s)) * st.total;
            got[s] = dv::multinomial_pick(row.data(), n, u, st.last_nonzero);
          }
        } else {
          dv::multinomial_without_replacement(row.data(), n, samples, seed, base + static_cast<uint64_t>(r * samples),
                                              got.data());
        }
        for (int64_t s = 0; s < samples; ++s)
          ASSERT_EQ(got[s], cpu[r * samples + s])
              << "row " << r << " draw " << s << (replacement ? "" : " without") << " replacement, seed " << seed;
      }
    }
  }
}

TEST(DeviceIndex, MultinomialRowFlagsBadWeights) {
  const double inf = std::numeric_limits<double>::infinity();
  for (std::vector<double> bad : {std::vector<double>{1, -1}, {1, inf}, {std::nan(""), 1}}) {
    EXPECT_FALSE(dv::multinomial_row(bad.data(), 2).valid);
  }
  std::vector<double> zero = {0, 0, 0};
  const dv::MultinomialRow st = dv::multinomial_row(zero.data(), 3);
  EXPECT_TRUE(st.valid);
  EXPECT_EQ(st.total, 0.0);
  EXPECT_EQ(st.nonzero, 0);
  // A row that cannot give enough distinct draws stops without indexing out of bounds.
  std::vector<double> one = {0, 2, 0};
  std::vector<int64_t> out(3, -7);
  dv::multinomial_without_replacement(one.data(), 3, 3, 1, 0, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 0, 0}));
}

namespace {

// The CUDA sort's result on the host: keys ascending, positions of equal keys in input order,
// values outside [0, limit) replaced by limit.
void sorted_runs(const std::vector<int64_t>& idx, int64_t limit, std::vector<uint32_t>& keys,
                 std::vector<int32_t>& pos) {
  const size_t n = idx.size();
  pos.resize(n);
  std::iota(pos.begin(), pos.end(), 0);
  auto key = [&](int32_t i) { return idx[i] >= 0 && idx[i] < limit ? idx[i] : limit; };
  std::stable_sort(pos.begin(), pos.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
  keys.resize(n);
  for (size_t k = 0; k < n; ++k) keys[k] = static_cast<uint32_t>(key(pos[k]));
}

}  // namespace

TEST(DeviceIndex, SortedRunsSumEmbeddingGradientsInTheCpuOrderBitForBit) {
  Generator gen(5);
  const int64_t n = 500, V = 37, D = 6, padding = 4;
  Tensor idx = randint(0, V, {n}, {.dtype = DType::I64}, &gen);
  Tensor grad = kernels::binary_scalar(kernels::BinaryOp::Mul, randn({n, D}, {}, &gen), 1e3);
  const std::vector<float> cpu = kernels::embedding_backward(grad, idx, V, padding).to_vector<float>();
  std::vector<uint32_t> keys;
  std::vector<int32_t> pos;
  sorted_runs(idx.to_vector<int64_t>(), V, keys, pos);
  const std::vector<float> g = grad.to_vector<float>();
  std::vector<float> out(static_cast<size_t>(V * D), 0.0f);
  std::set<int64_t> written;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t v = keys[k];
    for (int64_t c = 0; c < D; ++c) {
      if (v == padding) continue;
      float acc = 0;  // the kernel's thread (k, c)
      if (dv::for_each_in_run(keys.data(), pos.data(), n, k, V, [&](int64_t j) { acc += g[j * D + c]; })) {
        EXPECT_TRUE(written.insert(v * D + c).second) << "two runs wrote row " << v;
        out[v * D + c] = acc;
      }
    }
  }
  for (int64_t i = 0; i < V * D; ++i) ASSERT_EQ(out[i], cpu[i]) << "element " << i;
}

TEST(DeviceIndex, SortedRunsAddIndexAddSourcesInTheCpuOrderBitForBit) {
  // f16 rounds after every addition, so any change of order would show.
  Generator gen(6);
  const int64_t mid = 9, n = 200, post = 3;
  Tensor idx = randint(0, mid, {n}, {.dtype = DType::I64}, &gen);
  Tensor dst = kernels::cast(randn({mid, post}, {}, &gen), DType::F16);
  Tensor src = kernels::cast(randn({n, post}, {}, &gen), DType::F16);
  Tensor cpu = dst.clone();
  kernels::index_add_(cpu, 0, idx, src);
  std::vector<uint32_t> keys;
  std::vector<int32_t> pos;
  sorted_runs(idx.to_vector<int64_t>(), mid, keys, pos);
  const std::vector<float> s = src.to_vector<float>();
  std::vector<float> out = dst.to_vector<float>();
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t c = 0; c < post; ++c) {
      const int64_t v = keys[k];
      float acc = 0;
      bool started = false;
      if (dv::for_each_in_run(keys.data(), pos.data(), n, k, mid, [&](int64_t j) {
            if (!started) acc = out[v * post + c], started = true;
            acc = static_cast<float>(Half(acc + s[j * post + c]));
          }))
        out[v * post + c] = acc;
    }
  }
  EXPECT_EQ(out, cpu.to_vector<float>());
}

TEST(DeviceIndex, NnAndIndexCasesGiveTheCpuShapesAndDtypesOnCuda) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  const std::set<std::string> ours = {"cat",
                                      "stack",
                                      "index_select",
                                      "index_add_",
                                      "gather",
                                      "scatter",
                                      "scatter_add",
                                      "masked_fill",
                                      "tril",
                                      "triu",
                                      "pad",
                                      "one_hot",
                                      "multinomial",
                                      "embedding",
                                      "embedding_backward",
                                      "layer_norm",
                                      "layer_norm_backward",
                                      "add_layer_norm",
                                      "add_layer_norm_backward",
                                      "batch_norm",
                                      "batch_norm_backward",
                                      "dropout",
                                      "dropout_backward",
                                      "cross_entropy",
                                      "cross_entropy_backward",
                                      "nll_loss",
                                      "nll_loss_backward"};
  int runs = 0;
  for (const brisk::testing::OpCase& c : brisk::testing::all_cases()) {
    if (!ours.count(c.op)) continue;
    for (DType dt : c.dtypes) {
      for (bool strided : {false, true}) {
        const std::string what = c.op + " (" + c.variant + ", " + dtype_name(dt) + (strided ? ", strided)" : ")");
        std::vector<Tensor> want, got;
        ASSERT_NO_THROW(want = c.run(brisk::testing::CaseEnv{kCPU, dt, strided})) << what << " on the CPU";
        {
          cuda::recording::Session rec;
          ASSERT_NO_THROW(got = c.run(brisk::testing::CaseEnv{cuda_device(0), dt, strided})) << what << " on cuda";
        }
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t k = 0; k < got.size(); ++k) {
          ASSERT_EQ(got[k].defined(), want[k].defined()) << what << " output " << k;
          if (!want[k].defined()) continue;
          EXPECT_EQ(got[k].dtype(), want[k].dtype()) << what << " output " << k;
          EXPECT_TRUE(got[k].device().is_cuda()) << what << " output " << k;
          // one_hot with an inferred class count reads the indices' maximum back from the
          // device, which recording mode cannot compute.
          if (c.op != "one_hot") {
            EXPECT_EQ(got[k].sizes(), want[k].sizes()) << what << " output " << k;
          }
        }
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 100);
}
