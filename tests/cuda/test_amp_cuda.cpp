// Mixed precision on CUDA tensors, checked without a GPU in recording mode (the CUDA layer logs
// launches, copies and synchronisations instead of running them): the autocast policy casts on
// the device with the CPU's rules, and a GradScaler step costs one fused unscale pass over all
// gradients and exactly one host synchronisation (reading the inf/NaN flag).
#include <gtest/gtest.h>

#include <brisk/autograd/autocast.h>
#include <brisk/brisk.h>
#include <brisk/kernels/cuda_recording.h>

#include <string>

using namespace brisk;
using cuda::recording::Kind;

namespace {

size_t launches_of(const cuda::recording::Session& rec, const std::string& name) {
  size_t n = 0;
  for (const auto& e : rec.entries(Kind::Launch)) n += e.name == name;
  return n;
}

// Index of the first / last entry satisfying pred, or -1.
template <class Pred>
long first_index(const std::vector<cuda::recording::Entry>& es, Pred pred) {
  for (size_t i = 0; i < es.size(); ++i)
    if (pred(es[i])) return static_cast<long>(i);
  return -1;
}
template <class Pred>
long last_index(const std::vector<cuda::recording::Entry>& es, Pred pred) {
  for (size_t i = es.size(); i-- > 0;)
    if (pred(es[i])) return static_cast<long>(i);
  return -1;
}

}  // namespace

TEST(AutocastCuda, TheCpuPolicyAppliesToCudaTensors) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  const Device gpu = cuda_device(0);
  Tensor x = zeros({4, 8}, {.device = gpu});
  Tensor d = zeros({3}, {.dtype = DType::F64, .device = gpu});
  Tensor i = zeros({3}, {.dtype = DType::I64, .device = gpu});
  for (DType low : {DType::F16, DType::BF16}) {
    amp::Autocast ac(low);
    rec.clear();
    Tensor h = autograd::autocast(x, AutocastCategory::LowerPrecision);
    EXPECT_EQ(h.dtype(), low);
    EXPECT_EQ(h.device(), gpu);
    EXPECT_EQ(launches_of(rec, "copy"), 1u) << "the cast is one kernel on the device";
    EXPECT_EQ(rec.count(Kind::Sync), 0u);
    Tensor back = autograd::autocast(h, AutocastCategory::Fp32);
    EXPECT_EQ(back.dtype(), DType::F32);
    EXPECT_EQ(back.device(), gpu);
    // f64 and integer tensors are left alone, as on the CPU.
    EXPECT_TRUE(autograd::autocast(d, AutocastCategory::LowerPrecision).is_same(d));
    EXPECT_TRUE(autograd::autocast(i, AutocastCategory::Fp32).is_same(i));
  }
  EXPECT_TRUE(autograd::autocast(x, AutocastCategory::LowerPrecision).is_same(x)) << "off outside the guard";
}

TEST(AutocastCuda, TheCastIsDifferentiableBackToTheF32Parameter) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  Tensor w = zeros({5, 3}, {.device = cuda_device(0)});
  w.requires_grad_();
  Tensor low;
  {
    amp::Autocast ac(DType::F16);
    low = autograd::autocast(w, AutocastCategory::LowerPrecision);
  }
  low.backward(ones({5, 3}, {.dtype = DType::F16, .device = cuda_device(0)}));
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_EQ(w.grad().dtype(), DType::F32);
  EXPECT_EQ(w.grad().device(), cuda_device(0));
}

TEST(GradScalerCuda, OneFusedUnscaleAndOneHostSyncPerStep) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  std::vector<Tensor> ps;
  for (int k = 0; k < 150; ++k) {
    // Mixed dtypes and odd sizes: f32 and bf16 gradients unscale in one call.
    const DType dt = k % 3 == 0 ? DType::BF16 : DType::F32;
    Tensor p = zeros({k % 7 + 1, 5}, {.dtype = dt, .device = cuda_device(0)});
    p.requires_grad_();
    ps.push_back(p);
  }
  optim::SGD opt(ps, {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 1024.0});
  for (int step = 0; step < 3; ++step) {
    for (const Tensor& p : ps) p.set_grad(ones(p.sizes(), {.dtype = p.dtype(), .device = p.device()}));
    rec.clear();
    EXPECT_TRUE(scaler.step(opt));  // nothing ran while recording, so the flag reads clean
    scaler.update();
    EXPECT_EQ(rec.count(Kind::Sync), 1u) << "step " << step << ": only the inf/NaN flag is read back";
    EXPECT_EQ(rec.count(Kind::Copy), 1u) << "step " << step << ": one device-to-host copy (the flag)";
    // 100 f32 and 50 bf16 gradients: one launch each (110 per launch).
    EXPECT_EQ(launches_of(rec, "unscale_and_check_"), 2u);
    const auto es = rec.entries();
    const long last_unscale =
        last_index(es, [](const auto& e) { return e.kind == Kind::Launch && e.name == "unscale_and_check_"; });
    const long sync = first_index(es, [](const auto& e) { return e.kind == Kind::Sync; });
    const long first_update =
        first_index(es, [](const auto& e) { return e.kind == Kind::Launch && e.name == "sgd_step"; });
    EXPECT_LT(last_unscale, sync);
    EXPECT_LT(sync, first_update) << "the skip decision needs the flag before the update";
  }
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 3);
  EXPECT_EQ(opt.steps_taken(), 3);
}

// A classifier's loss under bf16 autocast on the GPU: the kernels read the bf16 logits and
// write the bf16 gradient; no cast of the (rows x classes) logits to f32 and back is launched,
// and no f32 tensor of their size is allocated (the logits of GPT-2's classifier: 16 x 1,024 x
// 50,304, 3.3 GB each in f32).
TEST(AutocastCuda, CrossEntropyReadsSixteenBitLogitsWithoutAnF32Copy) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  const Device gpu = cuda_device(0);
  const int64_t rows = 64, classes = 4099;
  Tensor z = zeros({rows, classes}, {.dtype = DType::BF16, .device = gpu});
  z.requires_grad_();
  const Tensor t = zeros({rows}, {.dtype = DType::I64, .device = gpu});
  rec.clear();
  const int64_t before = memory_stats(DeviceKind::CUDA).total_current;
  reset_peak_memory_stats(DeviceKind::CUDA);
  Tensor loss;
  {
    amp::Autocast ac(DType::BF16);
    loss = cross_entropy(z, t);
  }
  EXPECT_EQ(loss.dtype(), DType::F32);
  loss.backward();
  EXPECT_EQ(z.grad().dtype(), DType::BF16);
  // At most the one-element cast of the loss's gradient to f64; autocast's f32 op would add two
  // casts of the whole logits (to f32, and the f32 gradient back to bf16).
  EXPECT_LE(launches_of(rec, "copy"), 1u) << "no cast of the logits or of their gradient";
  EXPECT_EQ(launches_of(rec, "cross_entropy_rows"), 1u);
  EXPECT_EQ(launches_of(rec, "cross_entropy_backward_rows"), 1u);
  const int64_t extra = memory_stats(DeviceKind::CUDA).total_peak - before;
  EXPECT_LT(extra, rows * classes * 4) << "peak extra bytes " << extra;
  EXPECT_EQ(rec.count(Kind::Sync), 0u) << "the loss and its gradient wait for nothing";
}

// A classifier's step under autocast: bf16 logits from a product, a temporary only cross_entropy
// sees. The backward writes their gradient over them (one kernel, no logits-sized allocation at
// the peak); with the user holding the logits it needs a buffer of their size.
TEST(AutocastCuda, CrossEntropyBackwardWritesTheGradientOverTemporaryLogits) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  const Device gpu = cuda_device(0);
  const int64_t rows = 512, classes = 4099, k = 8;
  const int64_t logits_bytes = rows * classes * 2;
  const Tensor h = zeros({rows, k}, {.dtype = DType::BF16, .device = gpu});
  Tensor w = zeros({k, classes}, {.device = gpu});
  w.requires_grad_();
  const Tensor t = zeros({rows}, {.dtype = DType::I64, .device = gpu});
  auto backward_peak = [&](bool hold) {
    w.set_grad(Tensor());
    Tensor held, loss;
    {
      amp::Autocast ac(DType::BF16);
      if (hold) held = matmul(h, w);
      loss = cross_entropy(hold ? held : matmul(h, w), t);
    }
    rec.clear();
    const int64_t before = memory_stats(DeviceKind::CUDA).total_current;
    reset_peak_memory_stats(DeviceKind::CUDA);
    loss.backward();
    EXPECT_EQ(launches_of(rec, "cross_entropy_backward_rows"), 1u);
    EXPECT_EQ(rec.count(Kind::Sync), 0u);
    return memory_stats(DeviceKind::CUDA).total_peak - before;
  };
  EXPECT_LT(backward_peak(false), logits_bytes / 2) << "peak extra bytes in backward, logits a temporary";
  EXPECT_GE(backward_peak(true), logits_bytes) << "peak extra bytes in backward, logits held by the user";
}
