// A program outside the brisk tree: builds a tiny graph and checks its gradient.
#include <brisk/brisk.h>

#include <cstdio>

int main() {
  using namespace brisk;
  Tensor x = tensor<float>({1.f, 2.f, 3.f});
  x.requires_grad_();
  Tensor y = (x * x).sum();  // dy/dx = 2x
  y.backward();
  auto g = x.grad().to_vector<float>();
  bool ok = g[0] == 2.f && g[1] == 4.f && g[2] == 6.f && y.item<float>() == 14.f;
  std::printf("%s (brisk %s)\n", ok ? "consumer ok" : "consumer FAILED", BRISK_VERSION);
  return ok ? 0 : 1;
}
