// The Accelerator on a GPU, checked in recording mode: it picks the GPU of the process's local
// rank, prepare() moves the model, the optimizer's state and the data loaders' batches there,
// collectives keep tensors where they are, and checkpoints written from GPU tensors load on a
// CPU-only setup with the same bytes (and CPU checkpoints load onto the GPU).
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/elementwise.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
#include "cuda/gpu_skip.h"

using namespace brisk;
namespace rec = brisk::cuda::recording;
namespace fs = std::filesystem;

namespace {

struct Net : nn::Module {
  nn::Linear a{3, 4}, b{4, 2};
  Net() { register_modules({{"a", a}, {"b", b}}); }
  Tensor forward(const Tensor& x) override { return b(relu(a(x))); }
};

std::string fresh_dir(const std::string& name) {
  std::string d = (fs::path(::testing::TempDir()) / ("brisk_gpu_ckpt_" + name)).lexically_normal().string();
  fs::remove_all(d);
  return d;
}

// Bytes of a tensor wherever it lives.
std::string bytes_of(const Tensor& t) {
  Tensor c = kernels::contiguous(kernels::to_device(t, kCPU));
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// Gives `opt` Adam state for every parameter (as if it had stepped 3 times): exp_avg = 0.5 + i,
// exp_avg_sq = 2 + i, on the CPU.
void give_state(optim::Optimizer& opt) {
  optim::StateDict sd = opt.state_dict();
  const std::vector<Tensor> params = opt.all_params();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string p = "state." + std::to_string(i) + ".";
    sd.tensors.emplace_back(p + "exp_avg", full(params[i].sizes(), 0.5 + static_cast<double>(i)));
    sd.tensors.emplace_back(p + "exp_avg_sq", full(params[i].sizes(), 2.0 + static_cast<double>(i)));
    sd.scalars[p + "step"] = 3;
  }
  opt.load_state_dict(sd);
}

std::map<std::string, std::string> state_bytes(const optim::Optimizer& opt) {
  std::map<std::string, std::string> out;
  for (const auto& [k, t] : opt.state_dict().tensors) out[k] = bytes_of(t);
  return out;
}

}  // namespace

TEST(AcceleratorDevice, WithAGpuTheAcceleratorUsesItAndMakesItCurrent) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session(2);
  Accelerator acc;
  EXPECT_EQ(acc.device(), cuda_device(0)) << "a world of one: local rank 0";
  EXPECT_EQ(cuda::current_device(), 0);
  Accelerator on_cpu({.cpu = true});
  EXPECT_EQ(on_cpu.device(), kCPU);
}

TEST(AcceleratorDevice, PrepareMovesTheModelTheOptimizerStateAndTheBatches) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  Accelerator acc;
  Net net;
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  give_state(opt);
  const std::map<std::string, std::string> before = state_bytes(opt);
  const std::string w = bytes_of(net.a.weight);
  auto ds = std::make_shared<data::TensorDataset>(ones({8, 3}), arange(8));
  data::DataLoader loader(ds, {.batch_size = 4});
  acc.prepare(opt, loader, net);  // the optimizer before the model: its state still follows
  for (auto& [name, p] : net.named_parameters()) EXPECT_EQ(p.device(), cuda_device(0)) << name;
  EXPECT_EQ(bytes_of(net.a.weight), w);
  EXPECT_EQ(opt.all_params()[0].device(), cuda_device(0)) << "the optimizer holds the same tensors";
  for (const auto& [k, t] : opt.state_dict().tensors) EXPECT_EQ(t.device(), cuda_device(0)) << k;
  EXPECT_EQ(state_bytes(opt), before);
  EXPECT_EQ(loader.options().device, cuda_device(0));
  int64_t batches = 0;
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.device(), cuda_device(0));
    EXPECT_EQ(y.device(), cuda_device(0));
    ++batches;
  }
  EXPECT_EQ(batches, 2);
}

TEST(AcceleratorDevice, DevicePlacementOffLeavesEverythingWhereItIs) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  Accelerator acc({.device_placement = false});
  Net net;
  data::DataLoader loader(std::make_shared<data::TensorDataset>(ones({4, 3}), arange(4)), {.batch_size = 2});
  acc.prepare(net, loader);
  EXPECT_TRUE(net.a.weight.device().is_cpu());
  EXPECT_TRUE(loader.options().device.is_cpu());
}

TEST(AcceleratorDevice, CollectivesKeepGpuTensorsOnTheGpu) {
  SKIP_WITHOUT_RECORDING();
  rec::Session session;
  Accelerator acc;
  Tensor t = kernels::to_device(from_vector<float>({1, 2, 3}, {3}), cuda_device(0));
  for (const Tensor& r : {acc.gather(t), acc.reduce(t, dist::ReduceOp::Sum), acc.reduce(t, dist::ReduceOp::Mean),
                          acc.broadcast(t), acc.pad_across_processes(t), acc.gather_for_metrics(t)}) {
    EXPECT_EQ(r.device(), cuda_device(0));
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  }
}

TEST(AcceleratorDevice, AGpuCheckpointLoadsOnTheCpuWithTheSameBytes) {
  SKIP_WITHOUT_RECORDING();
  const std::string dir = fresh_dir("gpu_to_cpu"), model_dir = dir + "_model";
  std::map<std::string, std::string> params, grads, state;
  {
    rec::Session session;
    manual_seed(11);
    Accelerator acc;
    Net net;
    optim::Adam opt(net.parameters());
    give_state(opt);
    acc.prepare(net, opt);
    ASSERT_EQ(net.a.weight.device(), cuda_device(0));
    // A gradient saved in the middle of an accumulation.
    net.b.bias.set_grad(kernels::to_device(from_vector<float>({0.25f, -4}, {2}), cuda_device(0)));
    for (auto& [name, p] : net.named_parameters()) params[name] = bytes_of(p);
    grads["b.bias"] = bytes_of(net.b.bias.grad());
    state = state_bytes(opt);
    for (const auto& [k, t] : opt.state_dict().tensors) ASSERT_EQ(t.device(), cuda_device(0)) << k;
    acc.save_state(dir);
    acc.save_model(net, model_dir);
  }
  ASSERT_FALSE(cuda::recording::active());
  manual_seed(99);  // other initial weights
  Accelerator acc({.cpu = true});
  Net net;
  optim::Adam opt(net.parameters());
  acc.prepare(net, opt);
  ASSERT_NE(bytes_of(net.a.weight), params["a.weight"]);
  acc.load_state(dir);
  for (auto& [name, p] : net.named_parameters()) {
    EXPECT_TRUE(p.device().is_cpu()) << name;
    EXPECT_EQ(bytes_of(p), params[name]) << name;
  }
  ASSERT_TRUE(net.b.bias.grad().defined());
  EXPECT_EQ(bytes_of(net.b.bias.grad()), grads["b.bias"]);
  EXPECT_FALSE(net.a.weight.grad().defined());
  EXPECT_EQ(state_bytes(opt), state);
  data::SafetensorsFile model = data::load_safetensors(model_dir + "/model.safetensors");
  for (auto& [name, t] : model.tensors) EXPECT_EQ(bytes_of(t), params[name]) << name;
  fs::remove_all(dir);
  fs::remove_all(model_dir);
}

TEST(AcceleratorDevice, ACpuCheckpointLoadsOntoTheGpu) {
  SKIP_WITHOUT_RECORDING();
  const std::string dir = fresh_dir("cpu_to_gpu");
  std::map<std::string, std::string> params, state;
  {
    manual_seed(5);
    Accelerator acc({.cpu = true});
    Net net;
    optim::Adam opt(net.parameters());
    give_state(opt);
    acc.prepare(net, opt);
    for (auto& [name, p] : net.named_parameters()) params[name] = bytes_of(p);
    state = state_bytes(opt);
    acc.save_state(dir);
  }
  rec::Session session;
  manual_seed(6);
  Accelerator acc;
  Net net;
  optim::Adam opt(net.parameters());
  acc.prepare(net, opt);
  acc.load_state(dir);
  for (auto& [name, p] : net.named_parameters()) {
    EXPECT_EQ(p.device(), cuda_device(0)) << name;
    EXPECT_EQ(bytes_of(p), params[name]) << name;
  }
  for (const auto& [k, t] : opt.state_dict().tensors) EXPECT_EQ(t.device(), cuda_device(0)) << k;
  EXPECT_EQ(state_bytes(opt), state);
  fs::remove_all(dir);
}

TEST(AcceleratorDevice, APlacedStreamStillTellsTheLastBatch) {
  SKIP_WITHOUT_RECORDING();
  struct Count : data::IterableDataset {
    int64_t i = 0;
    std::optional<data::Example> next() override {
      if (i == 10) return std::nullopt;
      const double v = static_cast<double>(i++);
      return data::Example{full({1}, v), Tensor()};
    }
    void reset(uint64_t) override { i = 0; }
  };
  rec::Session session;
  Accelerator acc({.gradient_accumulation_steps = 100});
  data::DataLoader loader(std::make_shared<Count>(), {.batch_size = 2, .pin_memory = true});
  acc.prepare(loader);
  std::vector<bool> syncs;
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.device(), cuda_device(0));
    auto step = acc.accumulate();
    syncs.push_back(step.sync());
  }
  EXPECT_EQ(syncs, (std::vector<bool>{false, false, false, false, true})) << "only the last batch syncs";
}

// A sharded clip_grad_norm_ combines the shards' norms on the host and clips the shards where they
// live: on the GPU, the norm it clips with must be a GPU tensor too (it once was made on the CPU,
// and zero1-3 stopped at the first clip on a GPU).
TEST(AcceleratorDevice, ShardedClippingClipsTheShardsOnTheirDevice) {
  SKIP_WITHOUT_RECORDING();
  for (Sharding stage : {Sharding::Zero1, Sharding::Zero2, Sharding::Zero3}) {
    rec::Session session;
    Accelerator acc({.sharding = stage});
    Net net;
    optim::AdamW opt(net.parameters(), {.lr = 1e-3});
    acc.prepare(net, opt);
    ASSERT_EQ(net.a.weight.device(), cuda_device(0)) << enum_name(stage);
    acc.backward(net(kernels::to_device(ones({2, 3}), cuda_device(0))).sum());
    EXPECT_NO_THROW(acc.clip_grad_norm_(net, 1.0)) << enum_name(stage);
    EXPECT_NO_THROW(opt.step()) << enum_name(stage);
  }
}
