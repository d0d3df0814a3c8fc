// The peer measurement: libtorch (Debian's libtorch-dev, oneDNN inside) training the example CNN
// with the same shapes, optimizer and batch as brisk's `fashion_mnist --bench`, on random data.
// Usage: libtorch_cnn [--steps N] [--threads T] [--batch-size B] [--allow-reference-blas] [--profile FILE]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "libtorch_common.h"

struct Net : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 16, 3).padding(1)};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(16, 32, 3).padding(1)};
  torch::nn::Linear f1{32 * 7 * 7, 256}, f2{256, 10};
  Net() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("f1", f1);
    register_module("f2", f2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    return f2(torch::relu(f1(x.flatten(1))));
  }
};

static int run(int argc, char** argv) {
  const char* usage =
      "usage: libtorch_cnn [--steps N] [--threads T] [--batch-size B] [--allow-reference-blas] [--profile FILE]\n"
      "Times N training steps (default 200, after 20 warm-up steps) of the example CNN in libtorch and prints\n"
      "images/s. T threads (default 1) for libtorch and OpenBLAS, batch B (default 64). Refuses to run unless\n"
      "libtorch's BLAS is OpenBLAS (--allow-reference-blas: run anyway).\n"
      "--profile FILE: write a Chrome trace of the timed steps (torch's profiler; slows them).\n";
  peer::Args a;
  a.steps = 200;
  a.batch = 64;
  if (int rc = peer::parse_args("libtorch_cnn", usage, argc, argv, &a); rc >= 0) return rc;
  if (int rc = peer::setup("libtorch_cnn", a); rc >= 0) return rc;
  const int steps = a.steps, threads = a.threads, batch = a.batch;
  torch::manual_seed(0);
  Net net;
  torch::optim::Adam opt(net.parameters(), torch::optim::AdamOptions(1e-3));
  auto x = torch::rand({batch, 1, 28, 28});
  auto y = torch::randint(0, 10, {batch}, torch::kLong);
  auto step = [&] {
    auto loss = torch::nn::functional::cross_entropy(net.forward(x), y);
    peer::zero_grad_to_none(opt);
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 20; ++i) step();
  auto profile = peer::maybe_profile(a);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile.reset();  // writes the trace
  std::printf("libtorch %s, %d thread(s), batch %d: train images/s: %.0f\n", TORCH_VERSION, threads, batch,
              steps * batch / s);
  return 0;
}

int main(int argc, char** argv) {
  return peer::guarded_main("libtorch_cnn", run, argc, argv);
}
