// The example CNN's training step in recording mode (no GPU): its convolutions make cuDNN's
// descriptor, math-mode, output-size and algorithm calls on the first step only; every later step
// makes only the cudnnConvolution* execution calls (kernels/cuda/conv.cpp's plan cache), and the
// deterministic setting, part of each plan's key, gets plans of its own.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/conv_plan.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/settings.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace brisk;
using cuda::recording::Kind;

namespace {

bool conv_is_execution(const std::string& name) {
  return name == "cudnnConvolutionForward" || name == "cudnnConvolutionBackwardData" ||
         name == "cudnnConvolutionBackwardFilter";
}

// How many times each cuDNN call appears in the log: the convolutions' executions, or every other
// (preparation) call.
std::map<std::string, int> conv_cudnn_calls(const cuda::recording::Session& rec, bool executions) {
  std::map<std::string, int> n;
  for (const auto& e : rec.entries(Kind::Library))
    if (e.name.rfind("cudnn", 0) == 0 && conv_is_execution(e.name) == executions) ++n[e.name];
  return n;
}
std::map<std::string, int> conv_setup_calls(const cuda::recording::Session& rec) {
  return conv_cudnn_calls(rec, false);
}
const std::map<std::string, int> kNoConvSetup;

// The example CNN's training step at bench_gpu's batch of 64.
struct ConvCnnStep {
  models::FashionCNN net;
  std::unique_ptr<optim::Adam> opt;
  Tensor x, y;
  ConvCnnStep() {
    net.to(cuda_device());
    opt = std::make_unique<optim::Adam>(net.parameters(), optim::AdamOptions{.lr = 1e-3});
    x = randn({64, 1, 28, 28}).to(cuda_device());
    y = randint(0, 10, {64}).to(cuda_device());
  }
  void operator()() {
    opt->zero_grad();
    nn::cross_entropy(net(x), y).backward();
    opt->step();
  }
};

}  // namespace

TEST(ConvPlanRecording, CnnStepMakesCudnnSetupCallsOnTheFirstStepOnly) {
  if (!cuda::recording::supported()) GTEST_SKIP() << "this build of brisk has no CUDA support";
  cuda::recording::Session rec;
  kernels::DeterministicGuard det(true);
  kernels::clear_conv_plans();
  manual_seed(0);
  ConvCnnStep step;

  rec.clear();
  step();
  const std::map<std::string, int> first_setup = conv_setup_calls(rec);
  const std::map<std::string, int> executions = conv_cudnn_calls(rec, true);
  // Two convolutions forward; backward, the filter gradient of both and the input gradient of the
  // second (the images need none).
  EXPECT_EQ(executions, (std::map<std::string, int>{{"cudnnConvolutionForward", 2},
                                                    {"cudnnConvolutionBackwardData", 1},
                                                    {"cudnnConvolutionBackwardFilter", 2}}));
  for (const char* call :
       {"cudnnCreateTensorDescriptor", "cudnnCreateFilterDescriptor", "cudnnCreateConvolutionDescriptor",
        "cudnnSetConvolutionMathType", "cudnnGetConvolution2dForwardOutputDim",
        "cudnnGetConvolutionForwardAlgorithm_v7", "cudnnGetConvolutionBackwardDataAlgorithm_v7",
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7"})
    EXPECT_GT(first_setup.count(call), 0u) << call << " on the first step";
  EXPECT_EQ(
      first_setup.count("cudnnCreateConvolutionDescriptor") ? first_setup.at("cudnnCreateConvolutionDescriptor") : 0, 5)
      << "one plan per pass and shape";
  EXPECT_EQ(kernels::conv_plan_stats().built, 5);

  for (int i = 0; i < 3; ++i) {
    rec.clear();
    step();
    EXPECT_EQ(conv_setup_calls(rec), kNoConvSetup) << "step " << i + 2;
    EXPECT_EQ(conv_cudnn_calls(rec, true), executions) << "the execution calls only";
  }
  EXPECT_EQ(kernels::conv_plan_stats().built, 5);
  EXPECT_EQ(kernels::conv_plan_stats().reused, 15);

  // Not deterministic: other keys (cuDNN's fastest algorithms may use atomics), plans of their own.
  {
    kernels::DeterministicGuard off(false);
    rec.clear();
    step();
    EXPECT_EQ(conv_setup_calls(rec), first_setup);
    EXPECT_EQ(kernels::conv_plan_stats().built, 10);
    rec.clear();
    step();
    EXPECT_EQ(conv_setup_calls(rec), kNoConvSetup);
  }
  // Back to deterministic: the first plans are still there.
  rec.clear();
  step();
  EXPECT_EQ(conv_setup_calls(rec), kNoConvSetup);
  EXPECT_EQ(conv_cudnn_calls(rec, true), executions);
  EXPECT_EQ(kernels::conv_plan_stats().built, 10);

  // Clearing the device's plans makes the next step build them again.
  kernels::clear_conv_plans(0);
  rec.clear();
  step();
  EXPECT_EQ(conv_setup_calls(rec), first_setup);
}
