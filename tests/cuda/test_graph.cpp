// CUDA graphs (cuda::Graph) and what makes a training step capturable: the capture's host logic
// in recording mode (what is recorded, the allocator's private pool, the errors for work a graph
// cannot record, the capturable AdamW, a whole GPT-2 training step), and with a GPU, replays
// against eager steps bit for bit. Recording tests skip in a CPU-only build; GPU tests without a GPU.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/cuda.h>
#include <brisk/kernels/cuda_recording.h>
#include <brisk/kernels/elementwise.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/errors.h"
#include "cuda/gpu_skip.h"

using namespace brisk;
using cuda::recording::Kind;

namespace {

std::vector<std::string> library_calls(const cuda::recording::Session& rec) {
  std::vector<std::string> names;
  for (const auto& e : rec.entries(Kind::Library)) names.push_back(e.name);
  return names;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The messages of the errors fn throws (empty when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

// One GPT-2 training step as a graph can capture it (bf16 autocast, clipping without a host read,
// a capturable optimizer); returns the loss.
Tensor gpt2_step(models::GPT2& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  Tensor loss;
  {
    amp::Autocast ac(DType::BF16);
    loss = models::GPT2::loss(model(x), y);
  }
  loss.backward();
  (void)optim::clip_grad_norm_tensor_(model.parameters(), 1.0);
  opt.step();
  opt.zero_grad();
  return loss;
}

}  // namespace

TEST(GraphRecorded, CaptureRecordsTheWorkAndAReplayIsOneLaunch) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  Tensor a = ones({256}).to(cuda_device()), b = ones({256}).to(cuda_device());
  Tensor out;
  cuda::Graph g;
  EXPECT_FALSE(g.captured());
  rec.clear();
  g.capture([&] {
    EXPECT_TRUE(cuda::is_capturing());
    out = a * 2.0 + b;
  });
  EXPECT_FALSE(cuda::is_capturing());
  ASSERT_TRUE(g.captured());
  const std::vector<std::string> lib = library_calls(rec);
  ASSERT_TRUE(has(lib, "cudaStreamBeginCapture") && has(lib, "cudaStreamEndCapture") &&
              has(lib, "cudaGraphInstantiate"));
  EXPECT_GE(rec.count(Kind::Launch), 2u);
  const uint64_t side = rec.entries(Kind::Launch).front().stream;
  EXPECT_NE(side, 0u) << "captured on a side stream (the legacy default stream cannot capture)";
  for (const auto& e : rec.entries(Kind::Launch)) EXPECT_EQ(e.stream, side) << e.name;
  EXPECT_EQ(cuda::current_stream().handle(), nullptr) << "the current stream is restored";
  rec.clear();
  g.replay();
  g.replay();
  EXPECT_EQ(rec.count(Kind::Launch), 0u) << "a replay launches no kernel one by one";
  ASSERT_EQ(rec.count(Kind::Library), 2u);
  EXPECT_EQ(rec.entries(Kind::Library)[0].name, "cudaGraphLaunch");
  EXPECT_EQ(rec.entries(Kind::Library)[0].stream, 0u) << "replays run on the current stream";
  EXPECT_THROW(g.capture([] {}), Error) << "a second capture needs reset()";
  g.reset();
  EXPECT_FALSE(g.captured());
  EXPECT_THROW(g.replay(), Error);
}

TEST(GraphRecorded, MemoryOfTheCaptureIsNotHandedOutsideIt) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  cuda::empty_cache();
  const Shape shape{1 << 16};
  void* temp = nullptr;
  Tensor kept;
  cuda::Graph g;
  g.capture([&] {
    temp = empty(shape, DType::F32, cuda_device()).data_ptr();  // a temporary: freed inside the capture
    Tensor u = empty(shape, DType::F32, cuda_device());         // reuses the temporary's block ...
    EXPECT_EQ(u.data_ptr(), temp) << "inside the capture, freed blocks are reused in stream order";
    kept = empty(shape, DType::F32, cuda_device());
  });
  // ... but no tensor made outside the graph may ever get it: every replay writes there.
  for (int i = 0; i < 4; ++i) {
    Tensor e = empty(shape, DType::F32, cuda_device());
    EXPECT_NE(e.data_ptr(), temp);
    EXPECT_NE(e.data_ptr(), kept.data_ptr());
  }
  // A tensor made before the capture and freed during it joins the pool too.
  Tensor before = empty(shape, DType::F32, cuda_device());
  void* before_ptr = before.data_ptr();
  cuda::Graph g2;
  g2.capture([&] { before = Tensor(); });
  for (int i = 0; i < 4; ++i) EXPECT_NE(empty(shape, DType::F32, cuda_device()).data_ptr(), before_ptr);
  // empty_cache() keeps the pools' blocks (the graphs use them); reset() hands them back, and a new
  // capture reuses them instead of calling cudaMalloc.
  cuda::empty_cache();
  kept = Tensor();
  g.reset();
  g2.reset();
  rec.clear();
  g.capture([&] {
    Tensor t = empty(shape, DType::F32, cuda_device());
    Tensor u = empty(shape, DType::F32, cuda_device());
  });
  EXPECT_EQ(rec.count(Kind::Malloc), 0u) << "a capture after reset() reuses the released blocks";
}

TEST(GraphRecorded, WaitingForTheGpuOrReadingHostMemoryInsideACaptureIsAClearError) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  Tensor a = ones({8}).to(cuda_device());
  cuda::Graph g;
  std::string msg = error_of([&] { g.capture([&] { (void)sum(a).item<float>(); }); });
  EXPECT_NE(msg.find("waits for the GPU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("read results after replay()"), std::string::npos) << msg;
  EXPECT_FALSE(g.captured());
  EXPECT_FALSE(cuda::is_capturing()) << "a failed capture ends";
  msg = error_of([&] {
    g.capture([&] { (void)(a + from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {8}).to(cuda_device())); });
  });
  EXPECT_NE(msg.find("host memory"), std::string::npos) << msg;
  msg = error_of([&] { g.capture([&] { cuda::synchronize(); }); });
  EXPECT_NE(msg.find("synchronize"), std::string::npos) << msg;
  msg = error_of([&] { g.capture([&] { BRISK_THROW("user error"); }); });
  EXPECT_EQ(msg, "user error") << "the function's own errors pass through unchanged";
  // After the failures, eager work and a good capture still work.
  (void)(a * 3.0);
  g.capture([&] { (void)(a * 3.0); });
  EXPECT_TRUE(g.captured());
  cuda::Graph inner;
  cuda::Graph outer;
  msg = error_of([&] { outer.capture([&] { inner.capture([] {}); }); });
  EXPECT_NE(msg.find("do not nest"), std::string::npos) << msg;
}

TEST(GraphRecorded, CapturableAdamWReadsTheStepAndTheLearningRateOnTheGpu) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  Tensor w = randn({4, 4}).to(cuda_device()).requires_grad_(), b = zeros({4}).to(cuda_device()).requires_grad_();
  optim::AdamW opt({w, b}, {.lr = 1e-2, .capturable = true});
  auto fill_grads = [&] {
    w.set_grad(ones({4, 4}).to(cuda_device()));
    b.set_grad(ones({4}).to(cuda_device()));
  };
  cuda::Graph g;
  fill_grads();
  std::string msg = error_of([&] { g.capture([&] { opt.step(); }); });
  EXPECT_NE(msg.find("first step must run before"), std::string::npos) << msg;
  // The first step moves [step, lr] to the GPU; the update kernels count the step there.
  rec.clear();
  opt.step();
  EXPECT_GE(rec.count(Kind::Copy), 1u) << "the step count and learning rate are written to the GPU";
  bool counted = false;
  for (const auto& e : rec.entries(Kind::Launch)) counted = counted || e.name == "count_step_kernel";
  EXPECT_TRUE(counted);
  // Captured: nothing copied from the host; changing the learning rate inside is refused.
  rec.clear();
  g.capture([&] { opt.step(); });
  EXPECT_EQ(rec.count(Kind::Copy), 0u) << "a captured step reads the values on the GPU";
  cuda::Graph g2;
  msg = error_of([&] { g2.capture([&] { opt.set_lr(1e-3); }); });
  EXPECT_NE(msg.find("outside the captured function"), std::string::npos) << msg;
  // Outside, set_lr writes the GPU's copy that the replay reads.
  rec.clear();
  opt.set_lr(5e-3);
  EXPECT_EQ(rec.count(Kind::Copy), 1u);
  // Every parameter needs a gradient (one step count for all).
  b.set_grad(Tensor());
  msg = error_of([&] { opt.step(); });
  EXPECT_NE(msg.find("has no gradient"), std::string::npos) << msg;
  EXPECT_THROW(optim::AdamW({{{w}, {.capturable = true}}, {{b}, {.capturable = false}}}), Error)
      << "one capturable setting per optimizer";
}

TEST(GraphRecorded, AWholeGpt2TrainingStepCanBeCaptured) {
  SKIP_WITHOUT_RECORDING();
  cuda::recording::Session rec;
  manual_seed(0);
  models::GPT2 model(models::GPT2Config::preset("tiny"));
  model.to(cuda_device());
  optim::AdamW opt(model.param_groups({.lr = 1e-3, .weight_decay = 0.1, .capturable = true}));
  const int64_t T = model.config.block_size;
  Tensor x = randint(0, 256, {2, T}).to(cuda_device()), y = randint(0, 256, {2, T}).to(cuda_device());
  Tensor loss;
  auto step = [&] { loss = gpt2_step(model, opt, x, y); };
  step();
  step();
  cuda::Graph g;
  rec.clear();
  ASSERT_NO_THROW(g.capture(step)) << "no host synchronisation or host copy in a training step";
  EXPECT_GT(rec.count(Kind::Launch), 50u);
  EXPECT_EQ(rec.count(Kind::Malloc), 0u) << "warmed up: the capture's memory comes from the cache";
  rec.clear();
  g.replay();
  EXPECT_EQ(rec.count(Kind::Launch), 0u);
  EXPECT_EQ(rec.count(Kind::Library), 1u);
}

// --- with a GPU -----------------------------------------------------------------------------------

TEST(GraphGpu, ReplaysReadNewInputsAndWriteTheCapturedOutputs) {
  SKIP_WITHOUT_GPU();
  Tensor x = zeros({1000}).to(cuda_device());
  Tensor y;
  cuda::Graph g;
  (void)(x * 2.0 + 1.0);  // warm-up
  g.capture([&] { y = x * 2.0 + 1.0; });
  for (float v : {1.0f, -3.5f, 7.25f}) {
    kernels::copy_(x, full({1000}, v).to(cuda_device()));
    g.replay();
    const std::vector<float> got = y.to(kCPU).to_vector<float>();
    for (float e : got) ASSERT_EQ(e, v * 2.0f + 1.0f);
  }
}

// The same GPT-2 trained eagerly and by replaying a captured step, with a learning rate that
// changes every step: the same losses and weights, bit for bit (the same kernels in the same order).
TEST(GraphGpu, ReplayedTrainingMatchesEagerTrainingBitForBit) {
  SKIP_WITHOUT_GPU();
  const int64_t steps = 8;
  auto run = [&](bool graphed) {
    manual_seed(3);
    models::GPT2 model(models::GPT2Config::preset("tiny"));
    model.to(cuda_device());
    optim::AdamW opt(model.param_groups({.lr = 1e-3, .weight_decay = 0.1, .capturable = true}));
    const int64_t T = model.config.block_size;
    Generator gen(11);
    Tensor sx = zeros({4, T}, {.dtype = DType::I64}).to(cuda_device());
    Tensor sy = zeros({4, T}, {.dtype = DType::I64}).to(cuda_device());
    Tensor loss;
    auto step = [&] { loss = gpt2_step(model, opt, sx, sy); };
    cuda::Graph g;
    std::vector<float> losses;
    for (int64_t s = 0; s < steps; ++s) {
      kernels::copy_(sx, randint(0, 256, {4, T}, {.dtype = DType::I64}, &gen).to(cuda_device()));
      kernels::copy_(sy, randint(0, 256, {4, T}, {.dtype = DType::I64}, &gen).to(cuda_device()));
      opt.set_lr(1e-3 * (1.0 + 0.1 * static_cast<double>(s)));
      if (graphed && s >= 3) {
        if (!g.captured()) g.capture(step);
        g.replay();
      } else {
        step();
      }
      losses.push_back(loss.to(kCPU).item<float>());
    }
    std::vector<Tensor> params;
    for (const Tensor& p : model.parameters()) params.push_back(p.to(kCPU));
    return std::make_pair(losses, params);
  };
  const auto [eager_losses, eager_params] = run(false);
  const auto [graph_losses, graph_params] = run(true);
  for (int64_t s = 0; s < steps; ++s) EXPECT_EQ(eager_losses[s], graph_losses[s]) << "step " << s;
  ASSERT_EQ(eager_params.size(), graph_params.size());
  for (size_t i = 0; i < eager_params.size(); ++i)
    EXPECT_EQ(std::memcmp(eager_params[i].data_ptr(), graph_params[i].data_ptr(), eager_params[i].nbytes()), 0)
        << "parameter " << i;
}
