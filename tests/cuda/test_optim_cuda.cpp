// Optimizers and clipping on CUDA parameters, checked without a GPU in recording mode (the CUDA
// layer logs launches, copies and synchronisations instead of running them): state is made on
// the parameters' device, a step is a few multi-tensor launches for the whole parameter list and
// never waits for the GPU, and clip_grad_norm_ reads the device exactly once.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda_recording.h>

#include <cmath>
#include <string>

using namespace brisk;
using cuda::recording::Kind;

namespace {

// n CUDA parameters of odd small shapes, each with a gradient.
std::vector<Tensor> cuda_params(int n, DType dt = DType::F32) {
  std::vector<Tensor> ps;
  for (int i = 0; i < n; ++i) {
    Tensor p = zeros({i % 5 + 1, 3}, {.dtype = dt, .device = cuda_device(0)});
    p.requires_grad_();
    p.set_grad(ones({i % 5 + 1, 3}, {.dtype = dt, .device = cuda_device(0)}));
    ps.push_back(p);
  }
  return ps;
}

size_t launches_of(const cuda::recording::Session& rec, const std::string& name) {
  size_t n = 0;
  for (const auto& e : rec.entries(Kind::Launch)) n += e.name == name;
  return n;
}

}  // namespace

TEST(OptimCuda, AdamStateLivesOnTheParametersDeviceAndAStepIsAFewLaunches) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  std::vector<Tensor> ps = cuda_params(130);
  optim::AdamW opt(ps, {.lr = 1e-3, .amsgrad = true});
  rec.clear();
  opt.step();
  // p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq: 40 tensors per launch, so 130 take 4.
  EXPECT_EQ(launches_of(rec, "adam_step"), 4u);
  EXPECT_EQ(rec.count(Kind::Sync), 0u) << "an optimizer step must not wait for the GPU";
  rec.clear();
  opt.step();
  EXPECT_EQ(launches_of(rec, "adam_step"), 4u);
  EXPECT_EQ(rec.count(Kind::Launch), 4u) << "later steps launch nothing but the fused update";
  EXPECT_EQ(rec.count(Kind::Sync), 0u);
  const optim::StateDict sd = opt.state_dict();
  EXPECT_EQ(sd.tensors.size(), 3u * 130u);
  for (const auto& [key, t] : sd.tensors) EXPECT_EQ(t.device(), cuda_device(0)) << key;
}

TEST(OptimCuda, SgdWithMomentumOnSixteenBitParameters) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  std::vector<Tensor> ps = cuda_params(61, DType::BF16);
  optim::SGD opt(ps, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  rec.clear();
  opt.step();  // first step: p, grad, buffer: 60 tensors per launch
  EXPECT_EQ(launches_of(rec, "sgd_step"), 2u);
  EXPECT_EQ(rec.count(Kind::Sync), 0u);
  for (const auto& [key, t] : opt.state_dict().tensors) {
    EXPECT_EQ(t.device(), cuda_device(0)) << key;
    EXPECT_EQ(t.dtype(), DType::BF16) << key;
  }
}

TEST(OptimCuda, ClipGradNormReadsTheDeviceOnce) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  std::vector<Tensor> ps = cuda_params(200);
  for (double norm_type : {2.0, double(INFINITY)}) {
    rec.clear();
    optim::clip_grad_norm_(ps, 1.0, norm_type);
    EXPECT_EQ(rec.count(Kind::Sync), 1u) << "norm " << norm_type;
    EXPECT_EQ(launches_of(rec, "clip_grads_with_norm_"), 2u);  // 110 gradients per launch
    // The clip is ordered after the norm on the same stream; the host read comes last.
    const auto entries = rec.entries();
    size_t last_clip = 0, sync_at = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].kind == Kind::Launch && entries[i].name == "clip_grads_with_norm_") last_clip = i;
      if (entries[i].kind == Kind::Sync) sync_at = i;
    }
    EXPECT_GT(sync_at, last_clip);
  }
  rec.clear();
  optim::clip_grad_norm_(ps, 1.0, 2.0, /*error_if_nonfinite=*/true);
  EXPECT_EQ(rec.count(Kind::Sync), 1u);
}
