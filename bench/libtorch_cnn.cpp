// The peer measurement: libtorch (Debian's libtorch-dev, oneDNN inside) training the example CNN
// with the same shapes, optimizer and batch as brisk's `fashion_mnist --bench`, on random data.
// Usage: libtorch_cnn [--steps N] [--threads T] [--batch-size B]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

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

int main(int argc, char** argv) {
  int steps = 200, threads = 1, batch = 64;
  const char* usage =
      "usage: libtorch_cnn [--steps N] [--threads T] [--batch-size B]\n"
      "Times N training steps (after 20 warm-up steps) of the example CNN in libtorch and prints images/s.\n";
  for (int i = 1; i < argc; i += 2) {
    std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "libtorch_cnn: %s needs a value\n%s", f.c_str(), usage);
      return 2;
    }
    if (f == "--steps") steps = std::atoi(argv[i + 1]);
    else if (f == "--threads") threads = std::atoi(argv[i + 1]);
    else if (f == "--batch-size" || f == "--batch_size") batch = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "libtorch_cnn: unknown option %s\n%s", f.c_str(), usage);
      return 2;
    }
  }
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  Net net;
  torch::optim::Adam opt(net.parameters(), torch::optim::AdamOptions(1e-3));
  auto x = torch::rand({batch, 1, 28, 28});
  auto y = torch::randint(0, 10, {batch}, torch::kLong);
  auto step = [&] {
    auto loss = torch::nn::functional::cross_entropy(net.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 20; ++i) step();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("libtorch %s, %d thread(s), batch %d: train images/s: %.0f\n", TORCH_VERSION, threads, batch,
              steps * batch / s);
}
