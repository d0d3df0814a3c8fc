// NCCL for real on one GPU: a world of one process (dist::init without a launcher) runs every
// collective on CUDA tensors through an NCCL communicator of one rank, on the communication
// stream; outputs start as NaN so a collective that did nothing fails. The Reducer's GPU path
// (buckets flattened, all-reduced by NCCL, copied back) trains the example CNN to the same bits
// as training without it. Needs a GPU and NCCL; skips, saying why, otherwise.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>

#include <cmath>
#include <string>

#include "cuda/gpu_skip.h"

using namespace brisk;

namespace {

bool gpu_and_nccl(std::string* why) {
  *why = brisk::testing::gpu_unavailable_reason();
  if (!why->empty()) return false;
  if (dist::nccl_version() == 0) {
    *why = "this build of brisk has no NCCL";
    return false;
  }
  return true;
}

Tensor nan_like(const Tensor& t) {
  return full(t.sizes(), NAN, {.dtype = t.dtype(), .device = t.device()});
}

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.device().is_cuda()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << what << " at " << i;
}

}  // namespace

TEST(NcclWorldOfOne, EveryCollectiveRunsThroughNcclOnTheGpu) {
  std::string why;
  if (!gpu_and_nccl(&why)) GTEST_SKIP() << why;
  dist::ProcessGroup& pg = dist::init({.backend = dist::Backend::Self});
  ASSERT_EQ(pg.size(), 1);
  const Device gpu = cuda_device(0);
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const std::string d = dtype_name(dt);
    Tensor x = randn({1000}, {.dtype = dt, .device = gpu});
    const Tensor want = x.clone();
    for (dist::ReduceOp op :
         {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max, dist::ReduceOp::Min, dist::ReduceOp::Prod}) {
      Tensor t = x.clone();
      dist::WorkPtr w = pg.all_reduce_async(t, {.op = op});
      EXPECT_TRUE(w->device().is_cuda()) << "all_reduce " << dist::reduce_op_name(op) << " did not take the NCCL path";
      w->wait();
      expect_same(t, want, "all_reduce " + std::string(dist::reduce_op_name(op)) + " " + d);
      Tensor r = x.clone();
      pg.reduce(r, {.root = 0, .op = op});
      expect_same(r, want, "reduce " + std::string(dist::reduce_op_name(op)) + " " + d);
    }
    Tensor b = x.clone();
    pg.broadcast(b);
    expect_same(b, want, "broadcast " + d);

    Tensor gathered = nan_like(x);
    dist::WorkPtr w = pg.all_gather_async(gathered, x);
    EXPECT_TRUE(w->device().is_cuda()) << "all_gather did not take the NCCL path";
    w->wait();
    expect_same(gathered, want, "all_gather " + d);
    expect_same(pg.all_gather(x), want, "all_gather (allocating) " + d);

    Tensor g = nan_like(x);
    pg.gather(g, x, 0);
    expect_same(g, want, "gather " + d);
    Tensor s = nan_like(x);
    pg.scatter(s, x, 0);
    expect_same(s, want, "scatter " + d);
    Tensor rs = nan_like(x);
    pg.reduce_scatter(rs, x);
    expect_same(rs, want, "reduce_scatter " + d);
  }
  cuda::synchronize();
}

TEST(NcclWorldOfOne, TheReducersGpuPathTrainsTheCnnToTheSameBitsAsWithoutIt) {
  std::string why;
  if (!gpu_and_nccl(&why)) GTEST_SKIP() << why;
  dist::ProcessGroup& pg = dist::init({.backend = dist::Backend::Self});
  const Device gpu = cuda_device(0);
  manual_seed(3);
  Tensor xs = randn({4, 32, 1, 28, 28}, {.device = gpu});
  Tensor ys = randint(0, 10, {4, 32}, {.dtype = DType::I64, .device = gpu});

  auto train = [&](bool with_reducer) {
    manual_seed(7);
    models::FashionCNN net;
    net.to(gpu);
    optim::Adam opt(net.parameters(), {.lr = 1e-3});
    std::unique_ptr<dist::Reducer> reducer;
    // Small buckets, so the CNN's gradients travel in several.
    if (with_reducer)
      reducer = std::make_unique<dist::Reducer>(net.named_parameters(), pg,
                                                dist::ReducerOptions{.bucket_cap_mb = 0.25, .first_bucket_mb = 0.01});
    for (int step = 0; step < 6; ++step) {
      opt.zero_grad();
      Tensor loss = cross_entropy(net(xs.select(0, step % 4)), ys.select(0, step % 4));
      loss.backward();
      opt.step();
    }
    if (reducer) {
      EXPECT_GE(reducer->buckets().size(), 2u);
      EXPECT_EQ(reducer->last_step_events().size(), reducer->buckets().size()) << "buckets launched in the last step";
    }
    std::vector<std::vector<double>> params;
    for (const Tensor& p : net.parameters()) params.push_back(p.to_vector<double>());
    return params;
  };
  const auto plain = train(false);
  const auto reduced = train(true);
  ASSERT_EQ(plain.size(), reduced.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i], reduced[i]) << "parameter " << i;
}
