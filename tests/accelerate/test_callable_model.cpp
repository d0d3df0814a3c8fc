// A model whose forward takes the inputs and the targets and returns (logits, loss)
// (nn::CallableModule) trains, checkpoints and resumes under the Accelerator like any module.
#include <brisk/brisk.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "accelerate/programs/tiny_net.h"
#include "common/scratch.h"

using namespace brisk;
using brisk::testing::tiny_data;

namespace {

struct LossNet : nn::CallableModule<LossNet> {
  nn::Linear f1{4, 8}, f2{8, 3};
  LossNet() { register_modules({{"f1", f1}, {"f2", f2}}); }
  Tensor forward(const Tensor& x) override { return f2(relu(f1(x))); }
  std::tuple<Tensor, Tensor> forward(const Tensor& x, const Tensor& y) {
    Tensor logits = forward(x);
    return {logits, cross_entropy(logits, y)};
  }
};

std::vector<float> flat(nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST(AcceleratorCallableModel, TrainsSavesAndResumesWithSeveralInputsAndOutputs) {
  const std::string dir = (std::filesystem::path(brisk::testing::scratch()) / "callable").string();
  manual_seed(11);
  LossNet net, resumed_net;
  resumed_net.load_state_dict(net.state_dict());
  Accelerator acc({.seed = 1, .project_dir = dir});
  optim::AdamW opt(net.parameters(), {.lr = 0.05, .betas = {0.9, 0.95}});
  data::DataLoader loader(tiny_data(16), {.batch_size = 4});
  acc.prepare(net, opt, loader);
  int forward_calls = 0;
  net.register_forward_hook([&](nn::Module&, const nn::TensorList& in, const nn::TensorList& out) {
    EXPECT_EQ(in.size(), 2u);
    EXPECT_EQ(out.size(), 2u);
    ++forward_calls;
  });
  double first = 0, last = 0;
  for (int epoch = 0; epoch < 3; ++epoch)
    for (auto& [x, y] : loader) {
      auto [logits, loss] = net(x, y);
      if (first == 0) first = loss.item<double>();
      last = loss.item<double>();
      acc.backward(loss);
      opt.step();
      opt.zero_grad();
    }
  EXPECT_EQ(forward_calls, 12);
  EXPECT_LT(last, first);
  const std::string saved = acc.save_state(dir + "/ckpt");

  // A fresh process's objects: load the checkpoint, then both take the same next step.
  Accelerator acc2({.seed = 1, .project_dir = dir});
  optim::AdamW opt2(resumed_net.parameters(), {.lr = 0.05, .betas = {0.9, 0.95}});
  data::DataLoader loader2(tiny_data(16), {.batch_size = 4});
  acc2.prepare(resumed_net, opt2, loader2);
  acc2.load_state(saved);
  EXPECT_EQ(flat(resumed_net), flat(net));
  Tensor x = randn({4, 4});
  Tensor y = from_vector<int64_t>({0, 1, 2, 0}, {4});
  for (auto* pair : {&net, &resumed_net}) {
    auto [logits, loss] = (*pair)(x, y);
    loss.backward();
  }
  opt.step();
  opt2.step();
  EXPECT_EQ(flat(resumed_net), flat(net));
}
