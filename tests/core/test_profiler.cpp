// The per-op profiler: aggregation by name, self time of nested scopes, allocations per scope,
// the table, the BRISK_PROFILE switch, the trace sink, and the rows of a real training step.
#include "brisk/core/profiler.h"

#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/util/json.h>
#include <brisk/util/trace.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <latch>
#include <mutex>
#include <sstream>
#include <thread>

using namespace brisk;

namespace {

// Busy-waits at least `ms` milliseconds of the steady clock (a sleep could end early on no clock).
void spin_ms(double ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

const profiler::Row* find(const std::vector<profiler::Row>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

// Each test starts from an empty, enabled profiler and leaves it disabled. (Outside the anonymous
// namespace: the TEST_F classes derived from it have external linkage.)
class Profiler : public ::testing::Test {
 protected:
  void SetUp() override {
    profiler::reset();
    profiler::enable();
  }
  void TearDown() override {
    profiler::disable();
    profiler::reset();
  }
};

TEST_F(Profiler, NestedScopesGiveSelfTimes) {
  for (int rep = 0; rep < 2; ++rep) {
    profiler::Scope outer("test.outer");
    spin_ms(2);
    for (int i = 0; i < 3; ++i) {
      profiler::Scope inner("test.inner");
      spin_ms(1);
    }
  }
  const auto rows = profiler::key_averages();
  const profiler::Row* outer = find(rows, "test.outer");
  const profiler::Row* inner = find(rows, "test.inner");
  ASSERT_TRUE(outer && inner);
  EXPECT_EQ(outer->calls, 2);
  EXPECT_EQ(inner->calls, 6);
  // Lower bounds only (a loaded machine makes every span longer, never shorter).
  EXPECT_GE(inner->cpu_total_us, 6 * 1000.0);
  EXPECT_GE(outer->self_cpu_us, 2 * 2000.0);
  // Self = inclusive minus the scopes inside; a leaf's self time is all of its time.
  EXPECT_NEAR(outer->self_cpu_us, outer->cpu_total_us - inner->cpu_total_us, 1e-3);
  EXPECT_NEAR(inner->self_cpu_us, inner->cpu_total_us, 1e-3);
  EXPECT_GT(outer->cpu_total_us, inner->cpu_total_us);
  EXPECT_NEAR(outer->cpu_avg_us, outer->cpu_total_us / 2, 1e-6);
  // Self times add up to the whole: nothing counted twice.
  EXPECT_NEAR(profiler::totals().self_cpu_us, outer->cpu_total_us, 1e-3);
}

TEST_F(Profiler, RowsAreSortedBySelfTime) {
  // Wall-clock scopes: the gap is wide enough that the short one stays shorter even when the
  // test is preempted inside it for a few scheduler slices (ctest runs more tests than cores).
  {
    profiler::Scope a("test.short");
    spin_ms(0.1);
  }
  {
    profiler::Scope b("test.long");
    spin_ms(60);
  }
  const auto rows = profiler::key_averages();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "test.long");
  EXPECT_EQ(rows[1].name, "test.short");
}

TEST_F(Profiler, DisabledRecordsNothing) {
  profiler::disable();
  EXPECT_FALSE(profiler::enabled());
  {
    profiler::Scope s("test.disabled");
    Tensor t = empty({1024});
    profiler::step();
  }
  EXPECT_TRUE(profiler::key_averages().empty());
  const profiler::Totals t = profiler::totals();
  EXPECT_EQ(t.allocs, 0);
  EXPECT_EQ(t.steps, 0);
  // A scope opened while disabled stays unrecorded when the profiler comes on inside it, and its
  // inner scopes (opened while enabled) are recorded as top-level ones.
  {
    profiler::Scope s("test.opened_while_off");
    profiler::enable();
    profiler::Scope inner("test.inner_on");
  }
  const auto rows = profiler::key_averages();
  EXPECT_EQ(find(rows, "test.opened_while_off"), nullptr);
  ASSERT_NE(find(rows, "test.inner_on"), nullptr);
}

TEST_F(Profiler, AllocationsAreCountedPerScope) {
  {
    profiler::Scope outer("test.alloc_outer");
    Tensor a = empty({256});  // 1 KiB of f32
    {
      profiler::Scope inner("test.alloc_inner");
      Tensor b = empty({512});
      Tensor c = empty({512});
    }
  }
  Tensor outside = empty({16});
  profiler::step();
  const auto rows = profiler::key_averages();
  const profiler::Row* outer = find(rows, "test.alloc_outer");
  const profiler::Row* inner = find(rows, "test.alloc_inner");
  ASSERT_TRUE(outer && inner);
  EXPECT_EQ(outer->self_allocs, 1);
  EXPECT_EQ(outer->self_alloc_bytes, 1024);
  EXPECT_EQ(inner->self_allocs, 2);
  EXPECT_EQ(inner->self_alloc_bytes, 4096);
  EXPECT_EQ(outer->allocs, 3);
  EXPECT_EQ(outer->alloc_bytes, 5120);
  const profiler::Totals t = profiler::totals();
  EXPECT_EQ(t.allocs, 4);  // the one outside every scope too
  EXPECT_EQ(t.alloc_bytes, 5120 + 64);
  EXPECT_EQ(t.steps, 1);
  EXPECT_NE(profiler::table().find("Allocations: 4 (5.06 Kb), 4.0 (5.06 Kb) per step over 1 steps"), std::string::npos)
      << profiler::table();
}

TEST_F(Profiler, ThreadsAreMergedByName) {
  const char* dynamic = profiler::intern(std::string("test.") + "threaded");
  EXPECT_EQ(dynamic, profiler::intern("test.threaded"));  // one pointer per string
  { profiler::Scope s(dynamic); }
  std::thread t([] {
    for (int i = 0; i < 3; ++i) profiler::Scope s("test.threaded");  // another pointer, same name
  });
  t.join();  // the thread's rows outlive it
  const std::vector<profiler::Row> rows = profiler::key_averages();
  const profiler::Row* r = find(rows, "test.threaded");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->calls, 4);
}

TEST_F(Profiler, ResetForgetsEverything) {
  {
    profiler::Scope s("test.before_reset");
    Tensor t = empty({8});
  }
  profiler::step();
  profiler::reset();
  EXPECT_TRUE(profiler::key_averages().empty());
  EXPECT_EQ(profiler::totals().allocs, 0);
  EXPECT_EQ(profiler::totals().steps, 0);
}

TEST_F(Profiler, TableLooksLikePyTorchs) {
  for (int i = 0; i < 3; ++i) {
    profiler::Scope s("test.many");
  }
  {
    profiler::Scope s("test.slow");
    spin_ms(2);
  }
  const std::string t = profiler::table();
  std::istringstream in(t);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 8u) << t;  // rule, header, rule, 2 rows, rule, 2 footer lines
  EXPECT_EQ(lines[0].find_first_not_of("- "), std::string::npos);
  for (const char* h : {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self Allocs",
                        "Self Alloc Mem", "# of Calls"})
    EXPECT_NE(lines[1].find(h), std::string::npos) << h;
  EXPECT_EQ(lines[0].size(), lines[1].size());
  EXPECT_EQ(lines[3].size(), lines[1].size());
  EXPECT_EQ(lines[3].rfind("test.slow", 0), 0u) << "sorted by self time: " << t;
  EXPECT_NE(lines[3].find("ms"), std::string::npos) << lines[3];
  EXPECT_EQ(lines[3].substr(lines[3].size() - 2), " 1");
  EXPECT_EQ(lines[4].rfind("test.many", 0), 0u);
  EXPECT_EQ(lines[4].substr(lines[4].size() - 2), " 3");
  EXPECT_EQ(lines[6].rfind("Self CPU time total: ", 0), 0u);
  EXPECT_EQ(lines[7].rfind("Allocations: ", 0), 0u);

  // Other orders, a row limit, and an unknown key that names itself.
  const std::string by_count = profiler::table("count", 1);
  EXPECT_NE(by_count.find("test.many"), std::string::npos);
  EXPECT_EQ(by_count.find("test.slow"), std::string::npos);
  EXPECT_LT(profiler::table("name").find("test.many"), profiler::table("name").find("test.slow"));
  try {
    profiler::table("self_cuda_time_total");
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'self_cuda_time_total'"), std::string::npos) << e.what();
  }
}

TEST_F(Profiler, LongNamesAreShortened) {
  const std::string long_name(80, 'x');
  { profiler::Scope s(profiler::intern(long_name)); }
  const std::string t = profiler::table();
  EXPECT_EQ(t.find(long_name), std::string::npos);
  EXPECT_NE(t.find(std::string(52, 'x') + "..."), std::string::npos) << t;
}

namespace {
struct SinkEvent {
  std::string name;
  double start, end;
  int tid;
};
std::vector<SinkEvent> g_sink_events;
// Records into a BRISK_TRACE file of this test's own until trace_ops() reads it back.
void start_trace() {
  trace_set_path((std::filesystem::temp_directory_path() / ("brisk_profiler_" + std::to_string(getpid()))).string());
}
// The "op" events of the test's scopes (names starting "test."), in the order they finished.
std::vector<SinkEvent> trace_ops() {
  const std::string file = trace_flush();
  trace_set_path("");
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(file);
  std::vector<SinkEvent> out;
  json::Value doc = json::parse(text.str());
  for (const json::Value& e : doc.at("traceEvents").as_array()) {
    if (e.at("ph").as_string() != "X" || e.at("cat").as_string() != "op" ||
        !e.at("name").as_string().starts_with("test."))
      continue;
    const double ts = e.at("ts").as_double();
    out.push_back({e.at("name").as_string(), ts, ts + e.at("dur").as_double(), static_cast<int>(e.at("tid").as_int())});
  }
  return out;
}
}  // namespace

TEST_F(Profiler, FinishedScopesGoToTheTrace) {
  start_trace();
  {
    profiler::Scope outer("test.sink_outer");
    profiler::Scope inner("test.sink_inner");
  }
  std::thread([] { profiler::Scope s("test.sink_thread"); }).join();
  profiler::disable();
  { profiler::Scope off("test.sink_off"); }
  g_sink_events = trace_ops();
  ASSERT_EQ(g_sink_events.size(), 3u);
  EXPECT_EQ(g_sink_events[0].name, "test.sink_inner");  // in the order they finish
  EXPECT_EQ(g_sink_events[1].name, "test.sink_outer");
  EXPECT_EQ(g_sink_events[0].tid, 0);  // the main thread
  EXPECT_LE(g_sink_events[1].start, g_sink_events[0].start);
  EXPECT_GE(g_sink_events[1].end, g_sink_events[0].end);
  EXPECT_EQ(g_sink_events[2].name, "test.sink_thread");
  EXPECT_GE(g_sink_events[2].tid, 2);  // other threads: their own rows in the trace
  // The steady clock in microseconds, as the BRISK_TRACE recorder stamps its events.
  const double now_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
  EXPECT_LE(g_sink_events[2].end, now_us);
  EXPECT_GT(g_sink_events[2].end, now_us - 60e6);
}

// A thread's trace tid goes to the next thread once it has exited, so threads that come and go
// (a data loader's workers, every epoch) do not add a row to the trace each time.
TEST_F(Profiler, ExitedThreadsTraceTidsAreReused) {
  start_trace();
  for (int i = 0; i < 3; ++i) std::thread([] { profiler::Scope s("test.reuse"); }).join();
  std::latch both_recorded(2);  // both threads alive at once
  auto record_then_wait = [&] {
    { profiler::Scope s("test.reuse"); }
    both_recorded.arrive_and_wait();
  };
  std::thread a(record_then_wait);
  std::thread b(record_then_wait);
  a.join();
  b.join();
  g_sink_events = trace_ops();
  ASSERT_EQ(g_sink_events.size(), 5u);
  EXPECT_EQ(g_sink_events[0].tid, g_sink_events[1].tid);
  EXPECT_EQ(g_sink_events[1].tid, g_sink_events[2].tid);
  EXPECT_NE(g_sink_events[3].tid, g_sink_events[4].tid) << "two live threads never share a tid";
  EXPECT_EQ(std::min(g_sink_events[3].tid, g_sink_events[4].tid), g_sink_events[0].tid);
}

// BRISK_PROFILE is read once per process: these run in a fresh process each (a death test
// re-executes the test binary), which reports at exit.
TEST(ProfilerEnv, OnePrintsTheTableToStderrAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("BRISK_PROFILE", "1", 1);
  EXPECT_EXIT(
      {
        { profiler::Scope s("test.env_scope"); }
        std::exit(profiler::enabled() ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "test.env_scope(.|\n)*Self CPU time total: ");
  ::setenv("BRISK_PROFILE", "off", 1);
  EXPECT_EXIT(
      {
        { profiler::Scope s("test.env_scope"); }
        std::exit(profiler::enabled() ? 3 : 0);
      },
      ::testing::ExitedWithCode(0), "^$");
  ::unsetenv("BRISK_PROFILE");
}

TEST(ProfilerEnv, APathWritesTheTableThere) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = ::testing::TempDir() + "brisk_profile_env_test.txt";
  std::remove(path.c_str());
  ::setenv("BRISK_PROFILE", path.c_str(), 1);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("WORLD_SIZE");
  EXPECT_EXIT(
      {
        { profiler::Scope s("test.env_file_scope"); }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv("BRISK_PROFILE");
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no report at " << path;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("test.env_file_scope"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("Self CPU time total: "), std::string::npos) << text.str();
  std::remove(path.c_str());
}

// Two training steps of the example CNN: forward ops, their backward nodes, the optimizer and the loader.
TEST_F(Profiler, ATrainingStepRecordsOpsBackwardAndOptimizerRows) {
  profiler::disable();
  manual_seed(0);
  models::FashionCNN net;  // the example CNN: 2 x (conv2d, relu, max_pool2d), 2 x linear
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  auto ds = std::make_shared<data::TensorDataset>(randn({8, 1, 28, 28}), randint(0, 10, {8}));
  data::DataLoader loader(ds, {.batch_size = 4});
  profiler::enable();
  for (auto& [x, y] : loader) {
    Tensor loss = cross_entropy(net(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  profiler::disable();
  const auto rows = profiler::key_averages();
  std::string names;
  for (const auto& r : rows) names += r.name + " ";
  for (const char* want : {"conv2d", "relu", "max_pool2d", "linear", "cross_entropy", "Conv2dBackward",
                           // (the CNN's max_pool2d(relu(conv)) takes relu's place in backward)
                           "LinearBackward", "ReluBackward", "ReluMaxPool2dBackward", "Adam.step", "Adam.zero_grad",
                           "DataLoader.next", "autograd::backward", "AccumulateGrad"}) {
    const profiler::Row* r = find(rows, want);
    ASSERT_NE(r, nullptr) << want << " missing from: " << names;
    EXPECT_GT(r->calls, 0) << want;
  }
  EXPECT_EQ(find(rows, "conv2d")->calls, 4);
  EXPECT_EQ(find(rows, "Conv2dBackward")->calls, 4);
  EXPECT_EQ(find(rows, "linear")->calls, 4);
  EXPECT_EQ(find(rows, "Adam.step")->calls, 2);
  EXPECT_EQ(find(rows, "DataLoader.next")->calls, 3) << "two batches and the end";
  EXPECT_EQ(profiler::totals().steps, 2);
  EXPECT_GT(find(rows, "conv2d")->self_allocs, 0);
  // linear holds the GEMM inside it: its inclusive time is more than its self time.
  const profiler::Row* linear = find(rows, "linear");
  EXPECT_GT(linear->cpu_total_us, linear->self_cpu_us);
  // The backward pass holds its nodes.
  EXPECT_GE(find(rows, "autograd::backward")->cpu_total_us, find(rows, "Conv2dBackward")->cpu_total_us);
}
