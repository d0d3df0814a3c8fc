// The README's quick tour, compiled with the examples so the README stays true.
#include <brisk/brisk.h>
using namespace brisk;

struct Net : nn::Module {
  nn::Conv2d c1{1, 16, 3, {.padding = 1}}, c2{16, 32, 3, {.padding = 1}};
  nn::Linear f1{32 * 7 * 7, 256}, f2{256, 10};
  Net() { register_modules({{"c1", c1}, {"c2", c2}, {"f1", f1}, {"f2", f2}}); }
  Tensor forward(const Tensor& x) override {
    auto h = max_pool2d(relu(c1(x)), 2);
    h = max_pool2d(relu(c2(h)), 2);
    return f2(relu(f1(h.flatten(1))));
  }
};

int main() {
  manual_seed(0);
  Net net;
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  data::DataLoader train(data::FashionMNIST(data::Split::Train), {.batch_size = 64, .shuffle = true});
  for (int epoch = 0; epoch < 5; ++epoch)
    for (auto& [x, y] : train) {
      Tensor loss = nn::cross_entropy(net(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  data::save_safetensors("model.safetensors", net.state_dict());
}
