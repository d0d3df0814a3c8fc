// The example CNN of the README and examples/fashion_mnist: conv 1->16 and 16->32 (3x3, padding 1) each with ReLU and
// 2x2 max-pool, then linear 1568->256, ReLU, linear 256->10. Input (N, 1, 28, 28), output logits (N, 10).
#pragma once
#include "brisk/nn/conv.h"
#include "brisk/nn/layers.h"

namespace brisk::models {

class FashionCNN : public nn::Module {
 public:
  FashionCNN();
  Tensor forward(const Tensor& x) override;
  nn::Conv2d c1, c2;
  nn::Linear f1, f2;
};

}  // namespace brisk::models
