// A tiny classifier and a fixed synthetic data set shared by the Accelerator's tests and their
// multi-process worker: small enough to train hundreds of steps in a blink.
#pragma once
#include <brisk/brisk.h>

#include <cstring>
#include <string>
#include <vector>

namespace brisk::testing {

struct TinyNet : nn::Module {
  nn::Linear f1{4, 8}, f2{8, 3};
  nn::Dropout drop;
  explicit TinyNet(double dropout = 0.0) : drop(dropout) { register_modules({{"f1", f1}, {"f2", f2}, {"drop", drop}}); }
  Tensor forward(const Tensor& x) override { return f2(drop(relu(f1(x)))); }
};

// n examples of a regression: y = x . (1.5, -2, 0.5) + 0.5 + noise(0.1), x ~ N(0, 1) in 3 dims.
inline std::shared_ptr<data::TensorDataset> regression_data(int64_t n, uint64_t seed = 11) {
  Generator g(seed);
  Tensor x = randn({n, 3}, {}, &g);
  Tensor w = from_vector<float>({1.5f, -2.0f, 0.5f}, {3, 1});
  Tensor y = matmul(x, w) + 0.5 + randn({n, 1}, {}, &g) * 0.1;
  return std::make_shared<data::TensorDataset>(x, y);
}

// n examples: x ~ N(0, 1) in 4 dims, label = argmax of a fixed linear map (3 classes).
inline std::shared_ptr<data::TensorDataset> tiny_data(int64_t n, uint64_t seed = 42) {
  Generator g(seed);
  Tensor x = randn({n, 4}, {}, &g);
  Tensor w = randn({4, 3}, {}, &g);
  Tensor y = argmax(matmul(x, w), 1);
  return std::make_shared<data::TensorDataset>(x, y);
}

// Every parameter's values, flattened in registration order.
inline std::vector<float> flat_params(const nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

inline std::vector<float> flat_grads(const nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    Tensor g = p.grad();
    std::vector<float> v = g.defined() ? g.to_vector<float>() : std::vector<float>(static_cast<size_t>(p.numel()), 0);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// True when every rank holds exactly these bits.
inline bool same_on_every_rank(Accelerator& acc, const std::vector<float>& v) {
  Tensor all = acc.gather(from_vector<float>(v, {1, static_cast<int64_t>(v.size())}));
  std::vector<float> a = all.to_vector<float>();
  for (int r = 1; r < acc.num_processes(); ++r)
    if (std::memcmp(a.data(), a.data() + r * v.size(), v.size() * sizeof(float)) != 0) return false;
  return true;
}

// The checkpoint fault tests' training run: what their child (accelerator_worker save_loop) trains
// and saves, and what the test prepares to load the child's checkpoints, so the two always match.
// A micro-step counter, `done`, is registered for checkpointing.
struct SaveLoopRun {
  Accelerator acc;
  TinyNet net{0.2};
  optim::Adam opt{net.parameters(), {.lr = 0.01}};
  data::DataLoader loader{tiny_data(40), {.batch_size = 4, .shuffle = true, .seed = 5}};
  int64_t done = 0;

  explicit SaveLoopRun(const std::string& project_dir)
      : acc({.gradient_accumulation_steps = 2,
             .seed = 3,
             .project_dir = project_dir,
             .automatic_checkpoint_naming = true,
             .total_limit = 2}) {
    acc.prepare(net, opt, loader);
    acc.register_for_checkpointing(
        "done", [this] { return json::Value(done); }, [this](const json::Value& v) { done = v.as_int(); });
  }
  SaveLoopRun(const SaveLoopRun&) = delete;
  SaveLoopRun& operator=(const SaveLoopRun&) = delete;
};

}  // namespace brisk::testing
