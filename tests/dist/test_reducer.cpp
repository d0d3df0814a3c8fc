// The Reducer in a world of one (its all-reduces are identities, so gradients must come out
// unchanged): bucket layout, launch order, the end-of-backward finalize, no_sync, unused
// parameters, several passes, recovery from a failed pass; and the BRISK_TRACE writer.
// The multi-process behaviour is in tests/dist/mp/reducer_worker.cpp.
#include <gtest/gtest.h>

#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace brisk;

namespace {

dist::ProcessGroup& group() {
  static dist::ProcessGroup& pg = dist::init({.backend = dist::Backend::Self});
  return pg;
}

Tensor param(const Shape& s, double v, DType dt = DType::F32) {
  Tensor t = kernels::cast(full(s, v), dt);
  t.requires_grad_();
  return t;
}

// Loss = sum_k c_k * sum(p_k): the gradient of p_k is c_k everywhere.
Tensor weighted_sum(const std::vector<Tensor>& ps) {
  Tensor loss;
  for (size_t k = 0; k < ps.size(); ++k) {
    Tensor term = mul(ps[k].to(DType::F32).sum(), full({}, static_cast<double>(k + 1)));
    loss = loss.defined() ? add(loss, term) : term;
  }
  return loss;
}

std::vector<std::pair<std::string, Tensor>> named(const std::vector<Tensor>& ps) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < ps.size(); ++k) {
    std::string name = "p";
    name += std::to_string(k);
    out.emplace_back(name, ps[k]);
  }
  return out;
}

void expect_grad(const Tensor& p, double v) {
  ASSERT_TRUE(p.grad().defined());
  for (double g : p.grad().to_vector<double>()) EXPECT_EQ(g, v);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Reducer, BucketsTakeParametersInReverseOrderWithinTheCaps) {
  // 10 params of 40 KB (10,000 f32); first bucket <= 0.05 MiB (52,428 B): one param;
  // the rest <= 0.1 MiB (104,857 B): two params each.
  std::vector<Tensor> ps;
  ps.reserve(10);
  for (int k = 0; k < 10; ++k) ps.push_back(param({100, 100}, 1.0));
  dist::Reducer r(named(ps), group(), {.bucket_cap_mb = 0.1, .first_bucket_mb = 0.05});
  const auto& b = r.buckets();
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[0].params, (std::vector<size_t>{9}));
  EXPECT_EQ(b[1].params, (std::vector<size_t>{8, 7}));
  EXPECT_EQ(b[5].params, (std::vector<size_t>{0}));
  EXPECT_LE(b[0].bytes, 0.05 * 1024 * 1024);
  std::vector<size_t> order;
  for (const auto& bi : b) {
    EXPECT_LE(bi.bytes, 0.1 * 1024 * 1024);
    order.insert(order.end(), bi.params.begin(), bi.params.end());
  }
  EXPECT_EQ(order, (std::vector<size_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
}

TEST(Reducer, ZeroCapGivesOneBucketPerParameterAndHugeCapsOneBucket) {
  std::vector<Tensor> ps = {param({3}, 1), param({5, 2}, 1), param({7}, 1)};
  dist::Reducer each(named(ps), group(), {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  ASSERT_EQ(each.buckets().size(), 3u);
  EXPECT_EQ(each.buckets()[0].bytes, 7u * 4);
  EXPECT_EQ(each.buckets()[1].bytes, 10u * 4);
  dist::Reducer one(named(ps), group(), {.bucket_cap_mb = 1e6, .first_bucket_mb = 1e6});
  ASSERT_EQ(one.buckets().size(), 1u);
  EXPECT_EQ(one.buckets()[0].bytes, 20u * 4);
}

TEST(Reducer, DtypeChangeStartsANewBucketAndTiedOrFrozenParametersAreSkipped) {
  Tensor a = param({4}, 1), b = param({4}, 1, DType::BF16), c = param({4}, 1, DType::BF16);
  Tensor frozen = full({4}, 1.0);  // no requires_grad
  dist::Reducer r({{"a", a}, {"b", b}, {"frozen", frozen}, {"c", c}, {"a_tied", a}}, group());
  ASSERT_EQ(r.buckets().size(), 2u);
  EXPECT_EQ(r.buckets()[0].params, (std::vector<size_t>{3, 1}));  // c, b (bf16)
  EXPECT_EQ(r.buckets()[0].bytes, 16u);
  EXPECT_EQ(r.buckets()[1].params, (std::vector<size_t>{0}));  // a
}

TEST(Reducer, BackwardEndsWithAveragedGradientsAndOneEventPerBucketInOrder) {
  std::vector<Tensor> ps = {param({3}, 1), param({2, 2}, 1), param({5}, 1), param({1}, 1)};
  dist::Reducer r(named(ps), group(), {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  weighted_sum(ps).backward();
  for (size_t k = 0; k < ps.size(); ++k) expect_grad(ps[k], static_cast<double>(k + 1));
  const auto& ev = r.last_step_events();
  ASSERT_EQ(ev.size(), 4u);
  for (size_t k = 0; k < ev.size(); ++k) {
    EXPECT_EQ(ev[k].bucket, k);
    EXPECT_LE(ev[k].start_us, ev[k].end_us);
    if (k) {
      EXPECT_LE(ev[k - 1].start_us, ev[k].start_us);
    }
    EXPECT_LE(ev[k].start_us, r.last_backward_end_us());
  }
  r.finalize();  // idempotent: nothing pending
  expect_grad(ps[3], 4.0);
}

// With the profiler on, the Reducer's work in backward has rows of its own: one hook per
// parameter (copy into the bucket, launch), one finalize per pass inside the backward pass.
TEST(Reducer, ProfilerShowsTheHooksAndTheFinalize) {
  std::vector<Tensor> ps = {param({3}, 1), param({2, 2}, 1), param({5}, 1)};
  dist::Reducer r(named(ps), group(), {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  profiler::reset();
  profiler::enable();
  weighted_sum(ps).backward();
  profiler::disable();
  int64_t hooks = 0, finalizes = 0;
  double finalize_total = 0, backward_total = 0;
  for (const auto& row : profiler::key_averages()) {
    if (row.name == "Reducer.hook") hooks = row.calls;
    if (row.name == "Reducer.finalize") {
      finalizes = row.calls;
      finalize_total = row.cpu_total_us;
    }
    if (row.name == "autograd::backward") backward_total = row.cpu_total_us;
  }
  profiler::reset();
  EXPECT_EQ(hooks, 3);
  EXPECT_EQ(finalizes, 1);
  EXPECT_LE(finalize_total, backward_total);
  for (size_t k = 0; k < ps.size(); ++k) expect_grad(ps[k], static_cast<double>(k + 1));
}

TEST(Reducer, BucketsLaunchInBucketOrderEvenWhenHooksFireInForwardOrder) {
  // The hooks fire for p0 first (its use is the latest op), i.e. bucket 2 (holding p0) is ready
  // first; it must wait for buckets 0 and 1.
  std::vector<Tensor> ps = {param({2}, 1), param({2}, 1), param({2}, 1)};
  dist::Reducer r(named(ps), group(), {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  Tensor h = ps[2].sum();
  h = add(h, ps[1].sum());
  h = add(h, ps[0].sum());
  h.backward();
  const auto& ev = r.last_step_events();
  ASSERT_EQ(ev.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(ev[k].bucket, k);
  EXPECT_LE(ev[0].start_us, ev[1].start_us);
  EXPECT_LE(ev[1].start_us, ev[2].start_us);
}

TEST(Reducer, NoSyncAccumulatesLocallyAndTheNextSyncedPassReducesTheSum) {
  std::vector<Tensor> ps = {param({3}, 1), param({2}, 1)};
  dist::Reducer r(named(ps), group());
  r.set_sync(false);
  EXPECT_FALSE(r.sync());
  weighted_sum(ps).backward();
  EXPECT_TRUE(r.last_step_events().empty());  // nothing was communicated
  expect_grad(ps[1], 2.0);
  r.set_sync(true);
  weighted_sum(ps).backward();
  EXPECT_EQ(r.last_step_events().size(), 1u);
  expect_grad(ps[0], 2.0);
  expect_grad(ps[1], 4.0);
}

TEST(Reducer, TwoSyncedPassesBeforeAStepEachReduceOnce) {
  std::vector<Tensor> ps = {param({3}, 1), param({2}, 1)};
  dist::Reducer r(named(ps), group(), {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  weighted_sum(ps).backward();
  weighted_sum(ps).backward();
  EXPECT_EQ(r.last_step_events().size(), 2u);  // per pass: each bucket once
  expect_grad(ps[0], 2.0);
  expect_grad(ps[1], 4.0);
}

TEST(Reducer, UnusedParametersAreAnErrorNamingThem) {
  Tensor a = param({2}, 1), b = param({2}, 1), c = param({2}, 1);
  dist::Reducer r({{"f1.weight", a}, {"f2.weight", b}, {"f3.bias", c}}, group());
  std::string msg = error_of([&] { a.sum().backward(); });
  EXPECT_NE(msg.find("Reducer: parameters [f2.weight, f3.bias] got no gradient"), std::string::npos) << msg;
  EXPECT_NE(msg.find("find_unused_parameters"), std::string::npos) << msg;
  // The reducer is usable again afterwards.
  a.set_grad(Tensor());
  weighted_sum({a, b, c}).backward();
  expect_grad(c, 3.0);
}

TEST(Reducer, FindUnusedParametersLeavesUnusedGradientsAlone) {
  Tensor a = param({2}, 1), b = param({2}, 1);
  dist::Reducer r({{"a", a}, {"b", b}}, group(), {.find_unused_parameters = true});
  a.sum().backward();
  expect_grad(a, 1.0);
  EXPECT_FALSE(b.grad().defined());  // no rank had one: stays undefined, as in one process
  EXPECT_EQ(r.last_step_events().size(), 1u);
}

TEST(Reducer, HalfAndBfloat16GradientsAreReduced) {
  Tensor h = param({4}, 1, DType::F16), bf = param({4}, 1, DType::BF16);
  dist::Reducer r({{"h", h}, {"bf", bf}}, group());
  weighted_sum({h, bf}).backward();
  EXPECT_EQ(h.grad().dtype(), DType::F16);
  expect_grad(h, 1.0);
  expect_grad(bf, 2.0);
}

TEST(Reducer, APassThatThrowsHalfWayDoesNotPoisonTheNext) {
  Tensor a = param({2}, 1), b = param({2}, 1);
  dist::Reducer r({{"a", a}, {"b", b}}, group(), {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  bool fail = true;
  a.register_hook([&](const Tensor&) {
    if (fail) BRISK_THROW("boom");
  });
  EXPECT_NE(error_of([&] { weighted_sum({a, b}).backward(); }).find("boom"), std::string::npos);
  fail = false;
  a.set_grad(Tensor());
  b.set_grad(Tensor());
  weighted_sum({a, b}).backward();
  expect_grad(a, 1.0);
  expect_grad(b, 2.0);
  EXPECT_EQ(r.last_step_events().size(), 2u);
}

TEST(Reducer, DestroyedReducerLeavesBackwardAlone) {
  Tensor a = param({2}, 1);
  { dist::Reducer r({{"a", a}}, group()); }
  a.sum().backward();  // its hook is now a no-op
  expect_grad(a, 1.0);
}

TEST(Reducer, ConstructionErrorsNameTheParameter) {
  Tensor leaf = param({2}, 1);
  Tensor nonleaf = mul(leaf, full({}, 2.0));
  EXPECT_NE(error_of([&] {
              dist::Reducer r({{"x.y", nonleaf}}, group());
            }).find("Reducer: parameter x.y"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              dist::Reducer r({{"a", leaf}}, group(), {.bucket_cap_mb = -1});
            }).find("Reducer"),
            std::string::npos);
}

TEST(Trace, WritesChromeTraceJsonWithSpansFromTheReducerOnTheCommunicationThread) {
  const auto dir = std::filesystem::temp_directory_path() / ("brisk_trace_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string base = (dir / "run.json").string();
  trace_set_path(base);
  ASSERT_TRUE(trace_enabled());
  EXPECT_EQ(trace_file(), (dir / "run.rank0.json").string());
  std::vector<Tensor> ps = {param({3}, 1), param({2}, 1), param({4}, 1)};
  dist::Reducer r(named(ps), group(), {.bucket_cap_mb = 0, .first_bucket_mb = 0});
  {
    TraceSpan span("forward \"quoted\"", "compute");
    auto s2 = trace_span("inner", "compute");
  }
  {
    TraceSpan span("backward", "compute");
    weighted_sum(ps).backward();
  }
  trace_instant("epoch", "train");
  const std::string written = trace_flush();
  trace_set_path("");
  EXPECT_FALSE(trace_enabled());
  ASSERT_EQ(written, (dir / "run.rank0.json").string());

  std::ifstream f(written);
  std::stringstream ss;
  ss << f.rdbuf();
  json::Value doc = json::parse(ss.str());
  const auto& events = doc.at("traceEvents").as_array();
  std::set<std::string> names;
  int buckets_on_comm = 0;
  for (const auto& e : events) {
    const std::string ph = e.at("ph").as_string();
    if (ph == "M") continue;
    names.insert(e.at("name").as_string());
    EXPECT_EQ(e.at("pid").as_int(), 0);
    EXPECT_TRUE(e.at("ts").is_number());
    if (ph == "X") {
      EXPECT_GE(e.at("dur").as_double(), 0.0);
      EXPECT_TRUE(e.at("cat").is_string());
    }
    if (e.at("name").as_string().rfind("all_reduce bucket ", 0) == 0) {
      EXPECT_EQ(e.at("tid").as_int(), kTraceCommTid);
      ++buckets_on_comm;
    }
  }
  EXPECT_EQ(buckets_on_comm, 3);
  for (const char* n :
       {"forward \"quoted\"", "inner", "backward", "reducer finalize", "epoch", "launch bucket 0", "launch bucket 2"})
    EXPECT_TRUE(names.count(n)) << n;
  std::filesystem::remove_all(dir);
}

TEST(Reducer, ModesByNameAndWhereSharedMemoryCannotBeUsed) {
  for (auto m : {dist::ReducerMode::Auto, dist::ReducerMode::Overlap, dist::ReducerMode::SharedMemory})
    EXPECT_EQ(dist::reducer_mode_from_name(dist::reducer_mode_name(m)), m);
  try {
    dist::reducer_mode_from_name("fast");
    FAIL() << "an unknown mode was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto, overlap or shm"), std::string::npos) << e.what();
  }
  // A world of one communicates nothing: no segment, whatever the mode.
  Tensor a = param({3}, 0.0);
  {
    dist::Reducer r({{"a", a}}, group(), {.mode = dist::ReducerMode::SharedMemory});
    EXPECT_FALSE(r.uses_shared_memory());
  }
  // A fake world of 4 has no peers to share memory with: asked for explicitly, that is an error
  // that says why; Auto overlaps.
  auto fake = dist::fake_group(4);
  try {
    dist::Reducer r({{"a", a}}, *fake, {.mode = dist::ReducerMode::SharedMemory});
    FAIL() << "shared memory in a fake world";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not possible here: the group's backend is fake"), std::string::npos)
        << e.what();
  }
  dist::Reducer r({{"a", a}}, *fake);
  EXPECT_FALSE(r.uses_shared_memory());
}
