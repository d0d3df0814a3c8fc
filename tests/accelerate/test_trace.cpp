// BRISK_TRACE through the Accelerator: a prepared training loop records forward, backward,
// optimizer-step and data-loading spans into Chrome trace JSON that parses.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "common/scratch.h"

using namespace brisk;

TEST(AcceleratorTrace, TrainingLoopRecordsTheSpansOfAStep) {
  const std::string path = brisk::testing::scratch() + "/brisk_trace_test.json";
  trace_set_path(path);
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
  const std::string file = trace_flush();
  trace_set_path("");
  std::ifstream in(file);
  ASSERT_TRUE(in) << "no trace written at " << file;
  std::stringstream text;
  text << in.rdbuf();
  json::Value doc = json::parse(text.str());
  std::multiset<std::string> names;
  for (const auto& e : doc.at("traceEvents").as_array()) names.insert(e.at("name").as_string());
  for (const char* want : {"forward", "backward", "optimizer step"})
    EXPECT_EQ(names.count(want), 2u) << want << " spans (2 steps)";
  EXPECT_EQ(names.count("data loading"), 3u) << "two batches and the fetch that finds the end";
  std::remove(file.c_str());
}

// With the profiler on as well, every profiled scope is an "op" event on the thread that ran it:
// the ops inside the Accelerator's "forward" span, backward nodes, the optimizer, and the data
// loader's worker on a thread of its own.
TEST(AcceleratorTrace, ProfiledOpsAreEventsOnTheirThreads) {
  const std::string path = brisk::testing::scratch() + "/brisk_trace_ops_test.json";
  trace_set_path(path);
  profiler::reset();
  profiler::enable();
  {
    Accelerator acc({.cpu = true, .seed = 0});
    nn::Linear net(4, 2);
    optim::SGD opt(net.parameters(), {.lr = 0.1});
    auto ds = std::make_shared<data::TensorDataset>(randn({16, 4}), randn({16, 2}));
    data::DataLoader loader(ds, {.batch_size = 8, .num_workers = 1});
    acc.prepare(net, opt, loader);
    for (auto& [x, y] : loader) {
      acc.backward(mse_loss(net(x), y));
      opt.step();
      opt.zero_grad();
    }
  }
  profiler::disable();
  const std::string file = trace_flush();
  trace_set_path("");
  const int64_t linear_calls = [] {
    for (const auto& r : profiler::key_averages())
      if (r.name == "linear") return r.calls;
    return int64_t{0};
  }();
  profiler::reset();
  std::ifstream in(file);
  ASSERT_TRUE(in) << "no trace written at " << file;
  std::stringstream text;
  text << in.rdbuf();
  json::Value doc = json::parse(text.str());
  std::multiset<std::string> ops;
  std::vector<std::pair<double, double>> forwards, linears;
  std::set<int64_t> worker_tids, named_tids;
  for (const auto& e : doc.at("traceEvents").as_array()) {
    const std::string name = e.at("name").as_string();
    if (e.at("ph").as_string() == "M") {
      if (name == "thread_name") named_tids.insert(e.at("tid").as_int());
      continue;
    }
    const std::string cat = e.at("cat").as_string();
    const double ts = e.at("ts").as_double(), end = ts + (e.contains("dur") ? e.at("dur").as_double() : 0.0);
    if (cat == "compute" && name == "forward") forwards.emplace_back(ts, end);
    if (cat != "op") continue;
    EXPECT_EQ(e.at("ph").as_string(), "X") << name;
    ops.insert(name);
    if (name == "DataLoader.load_batch") {
      worker_tids.insert(e.at("tid").as_int());
    } else {
      EXPECT_EQ(e.at("tid").as_int(), kTraceComputeTid) << name << " ran on the main thread";
    }
    if (name == "linear") linears.emplace_back(ts, end);
  }
  EXPECT_EQ(ops.count("linear"), 2u);
  EXPECT_EQ(static_cast<int64_t>(ops.count("linear")), linear_calls) << "one event per recorded call";
  EXPECT_EQ(ops.count("mse_loss"), 2u);
  EXPECT_EQ(ops.count("LinearBackward"), 2u);
  EXPECT_EQ(ops.count("SGD.step"), 2u);
  EXPECT_EQ(ops.count("SGD.zero_grad"), 2u);
  EXPECT_EQ(ops.count("DataLoader.next"), 3u);
  EXPECT_GE(ops.count("DataLoader.load_batch"), 2u);
  // The worker builds the batches on a thread of its own, which the file names.
  EXPECT_GE(*worker_tids.rbegin(), 2);
  for (int64_t tid : worker_tids) EXPECT_EQ(named_tids.count(tid), 1u) << "tid " << tid << " has no name";
  // Each linear lies inside a forward span (one clock for both).
  ASSERT_EQ(forwards.size(), 2u);
  for (size_t i = 0; i < linears.size(); ++i) {
    EXPECT_GE(linears[i].first, forwards[i].first);
    EXPECT_LE(linears[i].second, forwards[i].second + 2e-3);
  }
  std::remove(file.c_str());
}
