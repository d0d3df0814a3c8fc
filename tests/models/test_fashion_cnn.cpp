// The example CNN: architecture, parameter count, and that it learns a tiny problem.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

using namespace brisk;

TEST(FashionCNN, HasTheDesignDocsLayersAndParameterCount) {
  models::FashionCNN net;
  // conv1 16*1*9+16, conv2 32*16*9+32, fc1 1568*256+256, fc2 256*10+10
  EXPECT_EQ(net.num_parameters(), 160 + 4640 + 401664 + 2570);
  std::vector<std::string> names;
  for (auto& [n, p] : net.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"c1.weight", "c1.bias", "c2.weight", "c2.bias", "f1.weight", "f1.bias",
                                             "f2.weight", "f2.bias"}));
  EXPECT_EQ(net(zeros({3, 1, 28, 28})).sizes(), (Shape{3, 10}));
  EXPECT_THROW(net(zeros({3, 28, 28})), Error);
}

TEST(FashionCNN, OverfitsASmallBatch) {
  manual_seed(0);
  models::FashionCNN net;
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  Tensor x = rand({16, 1, 28, 28});
  Tensor y = randint(0, 10, {16});
  double first = 0, last = 0;
  for (int step = 0; step < 80; ++step) {
    Tensor loss = cross_entropy(net(x), y);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(last, 0.1 * first) << "first " << first << " last " << last;
}
