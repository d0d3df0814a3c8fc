// The README's quick tour, compiled with the examples so the README stays true.
#include <brisk/brisk.h>
using namespace brisk;

struct Net : nn::Module {
  nn::Conv2d c1{1, 16, 3, {.padding = 1}}, c2{16, 32, 3, {.padding = 1}};
  nn::Linear f1{int64_t{32} * 7 * 7, 256}, f2{256, 10};
  Net() { register_modules({{"c1", c1}, {"c2", c2}, {"f1", f1}, {"f2", f2}}); }
  Tensor forward(const Tensor& x) override {
    auto h = max_pool2d(relu(c1(x)), 2);
    h = max_pool2d(relu(c2(h)), 2);
    return f2(relu(f1(h.flatten(1))));
  }
};

int main() {
  Accelerator acc({.mixed_precision = MixedPrecision::BF16, .gradient_accumulation_steps = 2});
  Net net;
  optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  data::DataLoader train(data::FashionMNIST(data::Split::Train), {.batch_size = 64, .shuffle = true});
  acc.prepare(net, opt, train);  // in place: shards the loader, syncs gradients
  for (int epoch = 0; epoch < 5; ++epoch)
    for (auto& [x, y] : train) {
      auto sync = acc.accumulate(net);  // all-reduce only every 2nd micro-step
      Tensor loss;
      {
        auto ac = acc.autocast();  // matmul/conv in bf16, loss in f32
        loss = nn::cross_entropy(net(x), y);
      }
      acc.backward(loss);  // buckets all-reduce while backward runs
      opt.step();          // a no-op on micro-steps that do not sync
      opt.zero_grad();
    }
  acc.save_state("checkpoints");  // atomic, with a checksummed manifest
}
