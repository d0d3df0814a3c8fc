// Host checks of the one-pass CUDA layer norm backward (no GPU needed): device/nn.h's
// FusedNormPlan run on the host as the kernel runs it (each row group's rows, each lane's pieces
// and the sums it keeps for their columns, the row sums through the warp or block tree, the
// groups' sums added in order into one partial per chunk, then the finish kernel's lanes over the
// chunks and the lanes in order), checked to visit every element once and to agree with the CPU
// kernels' dx, dweight and dbias, for layer_norm_backward and add_layer_norm_backward.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/device/nn.h>
#include <brisk/kernels/device/reduce.h>
#include <brisk/kernels/nn.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace brisk;
namespace dv = brisk::kernels::device;

namespace device_layer_norm_backward_test {

struct Grads {
  std::vector<float> dx, dw, db;
};

struct Inputs {
  int64_t R = 0, D = 0;
  std::vector<float> g, gh, x, w, mean, rstd;  // gh empty: layer_norm_backward (no h gradient)
};

// What layer_norm_backward_fused_kernel<W, float, AddH> and layer_norm_sums_finish_kernel compute,
// in their order. `visits` counts each element's use in the weight sums, `writes` each dx write.
template <int W>
Grads emulate(const Inputs& in, std::vector<int>& visits, std::vector<int>& writes) {
  constexpr int K = dv::kFusedPiecesPerLane<float, W>;
  const int64_t R = in.R, D = in.D, pieces = D / W;
  const dv::FusedNormPlan plan = dv::fused_norm_plan(R, pieces, K);
  EXPECT_TRUE(plan.fits) << "D " << D;
  const int64_t chunks = plan.chunks.chunks;
  Grads out;
  out.dx.assign(static_cast<size_t>(R * D), 0.0f);
  std::vector<float> part_w(static_cast<size_t>(chunks * D)), part_b(static_cast<size_t>(chunks * D));
  for (int64_t b = 0; b < chunks; ++b) {
    std::vector<float> cw(static_cast<size_t>(D)), cb(static_cast<size_t>(D));
    for (int group = 0; group < plan.rows_per_block; ++group) {
      // Each column belongs to one lane of the group, which sums it in registers over its rows.
      std::vector<float> sw(static_cast<size_t>(D), 0.0f), sb(static_cast<size_t>(D), 0.0f);
      dv::for_each_group_row(plan, R, b, group, [&](int64_t r) {
        const float mu = in.mean[r], rs = in.rstd[r];
        std::vector<dv::Pair<float>> lanes(static_cast<size_t>(plan.lanes), dv::PairSumOp<float>::identity());
        for (int t = 0; t < plan.lanes; ++t) {
          dv::for_each_lane_piece<K>(pieces, t, plan.lanes, [&](int, int64_t j) {
            for (int l = 0; l < W; ++l) {
              const int64_t c = j * W + l, i = r * D + c;
              const float g = in.g[i], xh = (in.x[i] - mu) * rs, gh = g * in.w[c];
              lanes[t].a += gh;
              lanes[t].b += gh * xh;
              sw[c] += g * xh;
              sb[c] += g;
              ++visits[i];
            }
          });
        }
        const dv::Pair<float> p = plan.lanes == dv::kWarp ? dv::emulate_warp_reduce<dv::PairSumOp<float>>(lanes.data())
                                                          : dv::emulate_block_reduce<dv::PairSumOp<float>>(lanes);
        const float s1 = p.a / static_cast<float>(D), s2 = p.b / static_cast<float>(D);
        for (int t = 0; t < plan.lanes; ++t) {
          dv::for_each_lane_piece<K>(pieces, t, plan.lanes, [&](int, int64_t j) {
            for (int l = 0; l < W; ++l) {
              const int64_t c = j * W + l, i = r * D + c;
              const float xh = (in.x[i] - mu) * rs, gh = in.g[i] * in.w[c];
              float d = rs * (gh - s1 - xh * s2);
              if (!in.gh.empty()) d += in.gh[i];
              out.dx[i] = d;
              ++writes[i];
            }
          });
        }
      });
      for (int64_t c = 0; c < D; ++c) {  // the groups in order
        cw[c] = group == 0 ? sw[c] : cw[c] + sw[c];
        cb[c] = group == 0 ? sb[c] : cb[c] + sb[c];
      }
    }
    std::copy(cw.begin(), cw.end(), part_w.begin() + b * D);
    std::copy(cb.begin(), cb.end(), part_b.begin() + b * D);
  }
  out.dw.assign(static_cast<size_t>(D), 0.0f);
  out.db.assign(static_cast<size_t>(D), 0.0f);
  for (int64_t c = 0; c < D; ++c) {
    float lw[dv::kFinishLanes], lb[dv::kFinishLanes];
    for (int y = 0; y < dv::kFinishLanes; ++y) {
      lw[y] = lb[y] = 0.0f;
      dv::for_each_finish_chunk(chunks, y, [&](int64_t k) {
        lw[y] += part_w[k * D + c];
        lb[y] += part_b[k * D + c];
      });
    }
    for (int y = 0; y < dv::kFinishLanes; ++y) {
      out.dw[c] += lw[y];
      out.db[c] += lb[y];
    }
  }
  return out;
}

// max |got - want| over max |want|.
double scaled_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return err / std::max(scale, 1e-30);
}

struct Case {
  int64_t R, D;
  int W;
};

void check(const Case& c, bool add_h) {
  const std::string what = "R " + std::to_string(c.R) + " D " + std::to_string(c.D) + " W " + std::to_string(c.W) +
                           (add_h ? " with h's gradient" : "");
  Generator gen(static_cast<uint64_t>(c.R * 131 + c.D));
  const Tensor x = randn({c.R, c.D}, {}, &gen) + 1.5;
  const Tensor w = randn({c.D}, {}, &gen), b = randn({c.D}, {}, &gen), g = randn({c.R, c.D}, {}, &gen);
  const Tensor gh = add_h ? randn({c.R, c.D}, {}, &gen) : Tensor();
  const kernels::LayerNormResult f = kernels::layer_norm(x, {c.D}, w, b, 1e-5);
  const kernels::LayerNormGrads cpu =
      add_h ? kernels::add_layer_norm_backward(g, gh, x, f.mean, f.rstd, w, {true, true, true})
            : kernels::layer_norm_backward(g, x, f.mean, f.rstd, w, {true, true, true});
  Inputs in{c.R,
            c.D,
            g.to_vector<float>(),
            add_h ? gh.to_vector<float>() : std::vector<float>(),
            x.to_vector<float>(),
            w.to_vector<float>(),
            f.mean.to_vector<float>(),
            f.rstd.to_vector<float>()};
  std::vector<int> visits(static_cast<size_t>(c.R * c.D), 0), writes(visits.size(), 0);
  const Grads got = c.W == 4 ? emulate<4>(in, visits, writes) : emulate<1>(in, visits, writes);
  for (size_t i = 0; i < visits.size(); ++i) {
    ASSERT_EQ(visits[i], 1) << what << ": element " << i << " in the weight sums";
    ASSERT_EQ(writes[i], 1) << what << ": element " << i << " of dx";
  }
  EXPECT_LE(scaled_error(got.dx, cpu.dx.to_vector<float>()), 1e-5) << what << ": dx";
  // Column sums of up to 20,000 rows in another order than the CPU's.
  EXPECT_LE(scaled_error(got.dw, cpu.dweight.to_vector<float>()), 2e-5) << what << ": dweight";
  EXPECT_LE(scaled_error(got.db, cpu.dbias.to_vector<float>()), 2e-5) << what << ": dbias";
}

}  // namespace device_layer_norm_backward_test

TEST(DeviceLayerNormBackward, PlanKeepsTheSumsInRegistersWithinTheLaunchBounds) {
  for (int K : {4, 8, 16, 32}) {
    for (int64_t pieces = 1; pieces < 40000; pieces = pieces < 70 ? pieces + 1 : pieces * 5 / 4) {
      const dv::FusedNormPlan p = dv::fused_norm_plan(100000, pieces, K);
      ASSERT_EQ(p.fits, pieces <= int64_t{dv::kMaxRowThreads} * K) << pieces << " pieces, " << K << " per lane";
      if (!p.fits) continue;
      ASSERT_GE(int64_t{p.lanes} * K, pieces);
      ASSERT_TRUE(p.lanes == dv::kWarp || int64_t{p.lanes / 2} * K < pieces) << "the fewest lanes that hold the row";
      ASSERT_EQ(p.lanes % dv::kWarp, 0);
      ASSERT_LE(p.lanes * p.rows_per_block, dv::kMaxRowThreads);
      ASSERT_LE(p.rows_per_block, dv::kMaxRowsPerBlock) << "the kernel's per-group scratch";
      // The groups' ordered sum needs 2 * D floats of shared memory: within the 48 KiB default.
      if (p.rows_per_block > 1) {
        ASSERT_LE(2 * pieces * (32 / K) * 4, 48 * 1024) << pieces;
      }
    }
  }
  const dv::FusedNormPlan gpt2 = dv::fused_norm_plan(16 * 1024, 768 / 4, 8);
  EXPECT_TRUE(gpt2.fits);
  EXPECT_EQ(gpt2.lanes, 32) << "a warp per row of 768 f32";
  EXPECT_EQ(gpt2.rows_per_block, 8);
  EXPECT_EQ(gpt2.chunks.chunks, 256) << "256 blocks: 2 per multiprocessor of an H100/H200";
  EXPECT_EQ(gpt2.chunks.rows_per_chunk, 64);
}

TEST(DeviceLayerNormBackward, OnePassSumsMatchTheCpuForEveryLaneLayout) {
  // A warp per row (GPT-2's 768, several chunks), rows not read as vectors, 2 and 8 warps per row
  // (the block tree and the groups' ordered sum), 4 and 1 group per block, a 512-lane row, and
  // 254 chunks of 79 rows.
  using device_layer_norm_backward_test::Case;
  for (Case c : {Case{200, 768, 4}, Case{70, 1001, 1}, Case{130, 2048, 4}, Case{9, 4096, 4}, Case{3, 16384, 4},
                 Case{20000, 8, 4}, Case{33, 33, 1}}) {
    for (bool add_h : {false, true}) device_layer_norm_backward_test::check(c, add_h);
  }
}
