// The example CNN.
#include "brisk/models/fashion_cnn.h"

#include "brisk/autograd/autograd.h"

namespace brisk::models {

FashionCNN::FashionCNN()
    : c1(1, 16, 3, {.padding = 1}), c2(16, 32, 3, {.padding = 1}), f1(int64_t{32} * 7 * 7, 256), f2(256, 10) {
  register_modules({{"c1", c1}, {"c2", c2}, {"f1", f1}, {"f2", f2}});
}

Tensor FashionCNN::forward(const Tensor& x) {
  BRISK_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
              "FashionCNN: expected images of shape (N, 1, 28, 28), got ", x.sizes());
  Tensor h = max_pool2d(relu(c1(x)), 2);  // (N, 16, 14, 14)
  h = max_pool2d(relu(c2(h)), 2);         // (N, 32, 7, 7)
  return f2(relu(f1(h.flatten(1))));      // (N, 10)
}

}  // namespace brisk::models
