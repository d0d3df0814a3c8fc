// Host checks of the nn family's device code (no GPU needed): dropout's per-element draw against
// the CPU kernel's mask, and the work plans of the CUDA layer norm, batch norm and cross entropy
// kernels run on the host exactly as the device runs them (each thread's elements in its order,
// combined with emulate_block_reduce), checked to visit every element once and to agree with the
// CPU kernels.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/device/dropout.h>
#include <brisk/kernels/device/nn.h>
#include <brisk/kernels/device/reduce.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/kernels/nn.h>

#include <cmath>
#include <vector>

using namespace brisk;
namespace dv = brisk::kernels::device;

namespace {

// Relative closeness for statistics computed in different orders.
void expect_close(double got, double want, double rtol, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), rtol * std::max(1.0, std::fabs(want))) << what << ": " << got << " vs " << want;
}

// What layer_norm_kernel computes for row r: each of the RowPlan's threads pushes its elements
// (for_each_owned) into a Welford state, and the block tree combines the threads.
template <class A>
dv::WelfordState<A> emulate_row_stats(const std::vector<A>& row, int W, std::vector<int>& visits) {
  const int64_t D = static_cast<int64_t>(row.size());
  const dv::RowPlan plan = dv::row_plan(D / W);
  std::vector<dv::WelfordState<A>> threads(static_cast<size_t>(plan.threads_per_row));
  for (int t = 0; t < plan.threads_per_row; ++t) {
    dv::WelfordState<A> st = dv::WelfordOp<A>::identity();
    auto push = [&](int64_t j) {
      st = dv::WelfordOp<A>::push(st, row[j]);
      ++visits[j];
    };
    auto vec = [&](int64_t v) {
      for (int l = 0; l < W; ++l) push(v * W + l);
    };
    if (W == 1)
      dv::for_each_owned<1>(D, t, plan.threads_per_row, vec, push);
    else if (W == 2)
      dv::for_each_owned<2>(D, t, plan.threads_per_row, vec, push);
    else if (W == 4)
      dv::for_each_owned<4>(D, t, plan.threads_per_row, vec, push);
    else
      dv::for_each_owned<8>(D, t, plan.threads_per_row, vec, push);
    threads[t] = st;
  }
  return dv::emulate_block_reduce<dv::WelfordOp<A>>(threads);
}

}  // namespace

TEST(DeviceDropout, DrawMatchesTheCpuMaskForEverySeedSizeAndP) {
  for (uint64_t seed : {1ull, 77ull, 0xdeadbeefull}) {
    for (int64_t n : {1, 3, 4, 5, 8, 1003}) {
      for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
        Generator gen(seed);
        kernels::DropoutResult r = kernels::dropout(ones({n}), p, &gen);
        EXPECT_EQ(gen.state().offset, dv::dropout_counters(n)) << "dropout reserves one counter per 4 elements";
        const std::vector<uint8_t> mask = kernels::cast(r.mask, DType::U8).to_vector<uint8_t>();
        for (int64_t b = 0; b < (n + 3) / 4; ++b) {
          bool keep[4];
          dv::dropout_keep4(seed, 0, b, static_cast<float>(p), keep);
          for (int l = 0; l < 4 && b * 4 + l < n; ++l) {
            const int64_t i = b * 4 + l;
            ASSERT_EQ(keep[l], mask[i] != 0) << "seed " << seed << " n " << n << " p " << p << " element " << i;
            ASSERT_EQ(dv::dropout_keep(seed, 0, i, static_cast<float>(p)), keep[l]);
          }
        }
      }
    }
  }
}

TEST(DeviceRows, RowPlanStaysWithinTheKernelsLaunchBoundsAndScratch) {
  for (int64_t v = 0; v < 2000000; v = v < 100 ? v + 1 : v * 3 / 2) {
    const dv::RowPlan p = dv::row_plan(v);
    ASSERT_EQ(p.threads_per_row % 32, 0) << v;
    ASSERT_LE(p.threads_per_row * p.rows_per_block, dv::kMaxRowThreads) << v;
    ASSERT_GE(p.rows_per_block, 1) << v;
    ASSERT_LE(p.rows_per_block, dv::kMaxRowsPerBlock) << v;
    ASSERT_TRUE(p.threads_per_row == dv::kMaxRowThreads || int64_t{p.threads_per_row} * 4 >= v) << v;
  }
}

TEST(DeviceLayerNorm, RowStatisticsInTheBlockTreeMatchTheCpu) {
  struct Case {
    int64_t R, D;
  };
  for (DType dt : {DType::F32, DType::F64, DType::F16}) {
    for (Case c : {Case{3, 37}, Case{2, 1024}, Case{2, 5000}, Case{4, 33}, Case{1, 1}}) {
      Generator gen(static_cast<uint64_t>(c.R * 7919 + c.D));
      Tensor x = kernels::cast(kernels::binary_scalar(kernels::BinaryOp::Add, randn({c.R, c.D}, {}, &gen), 3.0), dt);
      kernels::LayerNormResult cpu = kernels::layer_norm(x, {c.D}, Tensor(), Tensor(), 1e-5);
      const std::vector<double> xv = x.to_vector<double>(), mean = cpu.mean.to_vector<double>(),
                                rstd = cpu.rstd.to_vector<double>();
      // The kernel's vector width: 16 bytes of the storage type when D divides into vectors.
      const int es = static_cast<int>(dtype_size(dt));
      const int W = c.D % (16 / es) == 0 ? 16 / es : 1;
      for (int64_t r = 0; r < c.R; ++r) {
        std::vector<int> visits(static_cast<size_t>(c.D), 0);
        double m = 0, rs = 0;
        if (dt == DType::F64) {
          std::vector<double> row(xv.begin() + r * c.D, xv.begin() + (r + 1) * c.D);
          auto st = emulate_row_stats<double>(row, W, visits);
          m = st.mean;
          rs = 1.0 / std::sqrt(st.m2 / static_cast<double>(c.D) + 1e-5);
        } else {
          std::vector<float> row(xv.begin() + r * c.D, xv.begin() + (r + 1) * c.D);
          auto st = emulate_row_stats<float>(row, W, visits);
          m = st.mean;
          rs = 1.0f / std::sqrt(st.m2 / static_cast<float>(c.D) + 1e-5f);
        }
        for (int64_t j = 0; j < c.D; ++j) ASSERT_EQ(visits[j], 1) << "element " << j << " of a row of " << c.D;
        const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
        const std::string what =
            std::string(dtype_name(dt)) + " row " + std::to_string(r) + " of " + std::to_string(c.D);
        expect_close(m, mean[r], tol, what + " mean");
        expect_close(rs, rstd[r], tol * 10, what + " rstd");
      }
    }
  }
}

TEST(DeviceLayerNorm, ColumnChunksCoverEveryRowOnceAndSumLikeTheCpu) {
  struct Case {
    int64_t R, D;
  };
  for (Case c : {Case{70, 48}, Case{600, 33}, Case{5, 7}, Case{20000, 3}}) {
    Generator gen(static_cast<uint64_t>(c.R + c.D));
    Tensor x = randn({c.R, c.D}, {}, &gen), g = randn({c.R, c.D}, {}, &gen);
    kernels::LayerNormResult f = kernels::layer_norm(x, {c.D}, Tensor(), Tensor(), 1e-5);
    kernels::LayerNormGrads cpu = kernels::layer_norm_backward(g, x, f.mean, f.rstd, Tensor(), {false, true, true});
    const std::vector<float> xv = x.to_vector<float>(), gv = g.to_vector<float>(), mean = f.mean.to_vector<float>(),
                             rstd = f.rstd.to_vector<float>(), dw = cpu.dweight.to_vector<float>(),
                             db = cpu.dbias.to_vector<float>();
    const dv::ColumnChunks cc = dv::column_chunks(c.R);
    EXPECT_LE(cc.chunks, 256);
    EXPECT_GE(cc.chunks * cc.rows_per_chunk, c.R);
    for (int64_t col = 0; col < c.D; ++col) {
      std::vector<int> visits(static_cast<size_t>(c.R), 0);
      float tw = 0, tb = 0;  // the second kernel: chunks in order
      for (int64_t k = 0; k < cc.chunks; ++k) {
        float lane_w[dv::kColumnLanes], lane_b[dv::kColumnLanes];
        for (int y = 0; y < dv::kColumnLanes; ++y) {
          float aw = 0, ab = 0;
          dv::for_each_chunk_row(cc, c.R, k, y, [&](int64_t r) {
            const float gr = gv[r * c.D + col];
            aw += gr * (xv[r * c.D + col] - mean[r]) * rstd[r];
            ab += gr;
            ++visits[r];
          });
          lane_w[y] = aw;
          lane_b[y] = ab;
        }
        float pw = 0, pb = 0;  // the block's lanes in order
        for (int y = 0; y < dv::kColumnLanes; ++y) {
          pw += lane_w[y];
          pb += lane_b[y];
        }
        tw += pw;
        tb += pb;
      }
      for (int64_t r = 0; r < c.R; ++r) ASSERT_EQ(visits[r], 1) << "row " << r << " of " << c.R;
      expect_close(tw, dw[col], 1e-4, "dweight column " + std::to_string(col));
      expect_close(tb, db[col], 1e-4, "dbias column " + std::to_string(col));
    }
  }
}

TEST(DeviceBatchNorm, ChannelChunksCombinedInOrderMatchTheCpuStatistics) {
  struct Case {
    int64_t N, C, S;
  };
  for (Case c : {Case{8, 3, 25}, Case{4, 2, 4160}, Case{16, 6, 1}, Case{2, 1, 70000}}) {
    Generator gen(static_cast<uint64_t>(c.N * c.C * c.S));
    Tensor x = kernels::binary_scalar(kernels::BinaryOp::Add, randn({c.N, c.C, c.S}, {}, &gen), -2.0);
    kernels::BatchNormResult cpu = kernels::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
    const std::vector<float> xv = x.to_vector<float>(), mean = cpu.save_mean.to_vector<float>(),
                             invstd = cpu.save_invstd.to_vector<float>();
    const int64_t M = c.N * c.S;
    const dv::ChannelChunks cc = dv::channel_chunks(M);
    EXPECT_LE(cc.chunks, 64);
    EXPECT_GE(cc.chunks * cc.per_chunk, M);
    for (int64_t ch = 0; ch < c.C; ++ch) {
      std::vector<int> visits(static_cast<size_t>(M), 0);
      dv::WelfordState<float> total = dv::WelfordOp<float>::identity();
      for (int64_t k = 0; k < cc.chunks; ++k) {
        std::vector<dv::WelfordState<float>> threads(dv::kChannelThreads);
        for (int t = 0; t < dv::kChannelThreads; ++t) {
          dv::WelfordState<float> st = dv::WelfordOp<float>::identity();
          dv::for_each_chunk_element(cc, M, k, t, [&](int64_t e) {
            const int64_t n = e / c.S, s = e % c.S;
            st = dv::WelfordOp<float>::push(st, xv[(n * c.C + ch) * c.S + s]);
            ++visits[e];
          });
          threads[t] = st;
        }
        total = dv::WelfordOp<float>::combine(total, dv::emulate_block_reduce<dv::WelfordOp<float>>(threads));
      }
      for (int64_t e = 0; e < M; ++e) ASSERT_EQ(visits[e], 1) << "element " << e << " of channel " << ch;
      expect_close(total.mean, mean[ch], 1e-5, "mean of channel " + std::to_string(ch));
      expect_close(1.0f / std::sqrt(total.m2 / static_cast<float>(M) + 1e-5f), invstd[ch], 1e-4,
                   "invstd of channel " + std::to_string(ch));
    }
  }
}

TEST(DeviceCrossEntropy, OnlineLogSumExpInTheBlockTreeMatchesTheCpu) {
  for (int64_t C : {1, 10, 33, 50304}) {
    Generator gen(static_cast<uint64_t>(C));
    const int64_t N = 3;
    Tensor z = kernels::binary_scalar(kernels::BinaryOp::Mul, randn({N, C}, {}, &gen), 4.0);
    Tensor t = zeros({N}, {.dtype = DType::I64});
    const double e = 0.1;
    kernels::ClassLossResult cpu = kernels::cross_entropy(z, t, -100, e, kernels::Reduction::None);
    const std::vector<float> zv = z.to_vector<float>(), lse = cpu.lse.to_vector<float>(),
                             loss = cpu.loss.to_vector<float>();
    EXPECT_EQ(cpu.count.item<double>(), static_cast<double>(N));
    const int W = C % 4 == 0 ? 4 : 1;
    const dv::RowPlan plan = dv::row_plan(C / W);
    for (int64_t r = 0; r < N; ++r) {
      std::vector<dv::LogitsState<float>> threads(static_cast<size_t>(plan.threads_per_row));
      int64_t visited = 0;
      for (int th = 0; th < plan.threads_per_row; ++th) {
        dv::LogitsState<float> st = dv::LogitsOp<float>::identity();
        auto push = [&](int64_t j) {
          st = dv::LogitsOp<float>::push(st, zv[r * C + j]);
          ++visited;
        };
        auto vec = [&](int64_t v) {
          for (int l = 0; l < W; ++l) push(v * W + l);
        };
        if (W == 4)
          dv::for_each_owned<4>(C, th, plan.threads_per_row, vec, push);
        else
          dv::for_each_owned<1>(C, th, plan.threads_per_row, vec, push);
        threads[th] = st;
      }
      EXPECT_EQ(visited, C);
      const dv::LogitsState<float> st = dv::emulate_block_reduce<dv::LogitsOp<float>>(threads);
      const float l = st.max + std::log(st.sum);
      // The CPU adds 50304 exponentials one after another in f32; the tree is more accurate.
      expect_close(l, lse[r], 1e-5, "lse of row " + std::to_string(r) + " with C = " + std::to_string(C));
      // The loss as the kernel writes it (target 0).
      const float ef = static_cast<float>(e);
      float want = (1 - ef) * (l - zv[r * C]) + ef / static_cast<float>(C) * (static_cast<float>(C) * l - st.total);
      expect_close(want, loss[r], 1e-4, "loss of row " + std::to_string(r) + " with C = " + std::to_string(C));
    }
  }
}
