// The brisk half of docs/for-libtorch-users.md (its libtorch twin is printed there): a small
// classifier trained with method chains, enums and TensorOptions. Built and run as a test, so
// the document stays true.
#include <brisk/brisk.h>

#include <cstdio>

using namespace brisk;

struct Net : nn::Module {
  nn::Linear fc1{4, 32}, fc2{32, 3};
  Net() { register_modules({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(const Tensor& x) override { return fc2(fc1(x).relu()); }
};

int main() {
  manual_seed(0);
  Net net;
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor x = randn({256, 4});
  Tensor y = x.narrow(1, 0, 3).argmax(1);        // the class is the largest of the first 3 features
  Tensor w = tensor<float>({1.0f, 2.0f, 1.0f});  // class weights
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net(x), y, {.reduction = Reduction::Mean, .weight = w});
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  NoGradGuard no_grad;
  auto [values, pred] = net(x).max(1);
  const double accuracy = pred.eq(y).to(DType::F32).mean().item<double>();
  std::printf("loss %.4f -> %.4f, train accuracy %.3f\n", first, last, accuracy);
  return last < first && accuracy > 0.9 ? 0 : 1;
}
