// BRISK_TRACE through the Accelerator: a prepared training loop records forward, backward,
// optimizer-step and data-loading spans into Chrome trace JSON that parses.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

using namespace brisk;

TEST(AcceleratorTrace, TrainingLoopRecordsTheSpansOfAStep) {
  const std::string path = ::testing::TempDir() + "brisk_trace_test.json";
  dist::trace_set_path(path);
  {
    Accelerator acc({.cpu = true, .seed = 0});
    nn::Linear net(4, 2);
    optim::SGD opt(net.parameters(), {.lr = 0.1});
    auto ds = std::make_shared<data::TensorDataset>(randn({16, 4}), randn({16, 2}));
    data::DataLoader loader(ds, {.batch_size = 8});
    acc.prepare(net, opt, loader);
    for (auto& [x, y] : loader) {
      acc.backward(mse_loss(net(x), y));
      opt.step();
      opt.zero_grad();
    }
  }
  const std::string file = dist::trace_flush();
  dist::trace_set_path("");
  std::ifstream in(file);
  ASSERT_TRUE(in) << "no trace written at " << file;
  std::stringstream text;
  text << in.rdbuf();
  data::json::Value doc = data::json::parse(text.str());
  std::multiset<std::string> names;
  for (const auto& e : doc.at("traceEvents").as_array()) names.insert(e.at("name").as_string());
  for (const char* want : {"forward", "backward", "optimizer step"})
    EXPECT_EQ(names.count(want), 2u) << want << " spans (2 steps)";
  EXPECT_EQ(names.count("data loading"), 3u) << "two batches and the fetch that finds the end";
  std::remove(file.c_str());
}
