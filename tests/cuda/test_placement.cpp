// Moving tensors and modules to a GPU, checked in recording mode (which copies real bytes, so the
// values that arrive can be read back): Tensor::to is differentiable across devices, Module::to
// moves every parameter, buffer and gradient in place keeping handles, tied weights and autograd
// state. With a GPU, gradients also accumulate there (that needs the elementwise kernels).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/elementwise.h>

#include <string>
#include <vector>
#include "cuda/gpu_skip.h"

using namespace brisk;
namespace rec = brisk::cuda::recording;

namespace {

std::vector<float> values_of(const Tensor& t) {
  return t.to_vector<float>();
}

// Two layers and a third name for the first layer's weight (as GPT-2 ties its embedding and head),
// plus a non-float buffer.
struct TiedNet : nn::Module {
  nn::Linear a{3, 4}, b{4, 3};
  Tensor tied, steps;
  TiedNet() {
    register_modules({{"a", a}, {"b", b}});
    tied = register_parameter("tied", a.weight);
    steps = register_buffer("steps", full({1}, 7.0, {.dtype = DType::I64}));
  }
};

}  // namespace

TEST(Placement, TensorToTheGpuCarriesItsGradientBackToTheCpu) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor y = x.to(cuda_device(0));
  ASSERT_TRUE(y.device().is_cuda());
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(values_of(y), (std::vector<float>{1, 2, 3, 4}));
  y.backward(kernels::to_device(from_vector<float>({0.5f, 1, 2, 4}, {2, 2}), cuda_device(0)));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(x.grad().device().is_cpu());
  EXPECT_EQ(values_of(x.grad()), (std::vector<float>{0.5f, 1, 2, 4}));
  // Already there: the same tensor, no copy.
  EXPECT_TRUE(y.to(cuda_device(0)).is_same(y));
}

TEST(Placement, AGpuLeafGetsItsGradientOnTheGpu) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  Tensor p = kernels::to_device(from_vector<float>({1, 2, 3}, {3}), cuda_device(0)).requires_grad_();
  Tensor on_cpu = p.to(kCPU);
  on_cpu.backward(from_vector<float>({3, 2, 1}, {3}));
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(p.grad().device(), cuda_device(0));
  EXPECT_EQ(values_of(p.grad()), (std::vector<float>{3, 2, 1}));
}

TEST(Placement, NonBlockingCopiesFromPinnedMemoryAreOnlyEnqueued) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  Tensor pinned = cuda::pin_memory(from_vector<float>({1, 2, 3, 4}, {4}));
  ASSERT_TRUE(pinned.is_pinned());
  session.clear();
  Tensor y = pinned.to(cuda_device(0), /*non_blocking=*/true);
  EXPECT_EQ(session.count(rec::Kind::Copy), 1u);
  EXPECT_EQ(session.count(rec::Kind::Sync), 0u) << "the host waited for a non-blocking copy from pinned memory";
  session.clear();
  Tensor z = pinned.to(cuda_device(0));
  EXPECT_EQ(session.count(rec::Kind::Sync), 1u) << "a blocking copy returns once the bytes are there";
  EXPECT_EQ(values_of(y), values_of(z));
}

TEST(Placement, ModuleToMovesEveryTensorInPlaceKeepingHandlesTiesAndAutogradState) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  manual_seed(3);
  TiedNet net;
  Tensor w = net.a.weight;  // a handle taken before the move (as an optimizer holds one)
  net.a.bias.set_grad(full({4}, 0.25));
  std::vector<std::pair<std::string, std::vector<float>>> before;
  for (auto& [name, t] : net.named_parameters()) before.emplace_back(name, values_of(t));
  const MemoryCategory steps_category = net.steps.storage()->category();
  const size_t distinct = net.named_parameters().size() + net.named_buffers().size();
  ASSERT_EQ(distinct, 5u) << "a.weight (also 'tied'), a.bias, b.weight, b.bias, steps";

  session.clear();
  net.to(cuda_device(0));
  // One copy per distinct tensor and one for the gradient: the tied weight moved once.
  EXPECT_EQ(session.count(rec::Kind::Copy), distinct + 1);

  for (auto& [name, t] : net.state_dict()) EXPECT_EQ(t.device(), cuda_device(0)) << name;
  EXPECT_TRUE(w.device().is_cuda()) << "handles taken before the move see the move";
  EXPECT_TRUE(net.get("tied").is_same(net.get("a.weight")));
  EXPECT_EQ(net.get("tied").storage(), net.get("a.weight").storage());
  EXPECT_EQ(net.parameters().size(), 4u) << "tied weights are still listed once";
  for (auto& [name, t] : net.named_parameters()) {
    EXPECT_TRUE(t.requires_grad()) << name;
    EXPECT_TRUE(t.is_leaf()) << name;
  }
  ASSERT_TRUE(net.a.bias.grad().defined());
  EXPECT_EQ(net.a.bias.grad().device(), cuda_device(0));
  EXPECT_EQ(values_of(net.a.bias.grad()), std::vector<float>(4, 0.25f));
  EXPECT_EQ(net.steps.dtype(), DType::I64);
  EXPECT_EQ(net.steps.to_vector<int64_t>(), (std::vector<int64_t>{7}));
  EXPECT_EQ(net.steps.storage()->category(), steps_category);
  EXPECT_EQ(net.a.weight.storage()->category(), MemoryCategory::Parameters) << "still counted as parameters";

  // Moving again is a no-op; moving back restores the same values.
  session.clear();
  net.to(cuda_device(0));
  EXPECT_EQ(session.count(rec::Kind::Copy), 0u);
  net.to(kCPU);
  for (auto& [name, values] : before) EXPECT_EQ(values_of(net.get(name)), values) << name;
  EXPECT_TRUE(net.get("tied").is_same(net.get("a.weight")));
}

TEST(Placement, ModuleToWithADtypeCastsThenMoves) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  nn::Linear lin(2, 2);
  const std::vector<float> w = values_of(lin.weight);
  lin.to(cuda_device(0), DType::F64);
  EXPECT_EQ(lin.weight.device(), cuda_device(0));
  EXPECT_EQ(lin.weight.dtype(), DType::F64);
  std::vector<double> got = lin.weight.to_vector<double>();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(got[i], static_cast<double>(w[i]));
}

// With a GPU: a model trained there keeps its gradients there, and two backward passes add up.
TEST(Placement, GradientsAccumulateOnTheGpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "needs a GPU (accumulation runs the elementwise kernels)";
  nn::Linear lin(3, 2);
  lin.to(cuda_device(0));
  Tensor x = kernels::to_device(ones({4, 3}), cuda_device(0));
  lin(x).sum().backward();
  const std::vector<float> once = values_of(lin.weight.grad());
  lin(x).sum().backward();
  EXPECT_EQ(lin.weight.grad().device(), cuda_device(0));
  const std::vector<float> twice = values_of(lin.weight.grad());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
}

TEST(Placement, OptimizerStateIsCreatedOnTheParametersDevice) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  nn::Linear lin(3, 2);
  lin.to(cuda_device(0));
  for (Tensor& p : lin.parameters()) p.set_grad(kernels::to_device(ones(p.sizes()), cuda_device(0)));
  optim::AdamW opt(lin.parameters());
  try {
    opt.step();  // creates exp_avg / exp_avg_sq first, then runs the fused update
  } catch (const Error&) {
    // Without the optimizer's CUDA kernel (recording mode before it exists) the update itself
    // fails; the state was made before it.
  }
  const optim::StateDict sd = opt.state_dict();
  ASSERT_EQ(sd.tensors.size(), 4u) << "exp_avg and exp_avg_sq for the weight and the bias";
  for (const auto& [k, t] : sd.tensors) EXPECT_EQ(t.device(), cuda_device(0)) << k;
}
