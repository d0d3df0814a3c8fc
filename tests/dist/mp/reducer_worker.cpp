// The Reducer's multi-process tests (run under mpirun by tests/dist/mp/CMakeLists.txt):
// `reducer_worker SCENARIO [--token=...]`; each scenario checks on every rank and exits
// non-zero when any check failed.
//   equivalence  N ranks x batch b with the Reducer == one process with batch N*b (SGD to
//                rtol 1e-6, Adam to rtol 1e-5) after every step; ranks bit-identical
//   no_sync      gradients differ across ranks under set_sync(false), agree at the next synced
//                backward and equal the doubled-batch gradient
//   buckets      >= 5 buckets within the caps, reverse order; all-reduces start before the
//                backward ends, in last_step_events() and in the BRISK_TRACE file
//   unused       the unused-parameter error; find_unused_parameters; f16/bf16 gradients
//   checkpoint   the equivalence test with every layer under autograd::checkpoint: the hooks
//                fire inside the recomputations' nested passes, and the Reducer's finalize must
//                still run once, when the whole backward ends
//   world        the world-of-one unit tests (tests/dist/test_reducer.cpp) in a real world,
//                where averaging is not an identity: rank r's gradient of parameter k is
//                (k + 1)(r + 1), so every rank must end with (k + 1)(W + 1) / 2
// Every scenario runs under BRISK_REDUCER_MODE=overlap and =shm (tests/dist/mp/CMakeLists.txt);
// the shared-memory mode all-reduces at the end of backward, so `buckets` and `world` check
// that instead of overlap there.
//   shm          the mode is what was asked for (options, environment); gradients are views of
//                the shared buckets and outlive the Reducer; f64/f16/bf16 buckets; 3 steps of
//                training match the overlap mode's (bit for bit on 2 ranks)
//   shm_late     rank 1 never runs backward: rank 0 times out in the shared-memory barrier
//   shm_exit     rank 1 exits before backward: rank 0 notices within milliseconds
#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using namespace brisk;

namespace {

int g_failures = 0;
int g_rank = 0;

#define CHECK(cond, ...)                                                                                  \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      ++g_failures;                                                                                       \
      std::fprintf(stderr, "[rank %d] CHECK failed at %s:%d: %s %s\n", g_rank, __FILE__, __LINE__, #cond, \
                   ::brisk::detail::str_cat(__VA_ARGS__).c_str());                                        \
    }                                                                                                     \
  } while (0)

// Two Linear layers with tanh between: the model of the equivalence tests.
struct Mlp : nn::Module {
  nn::Linear f1{6, 16}, f2{16, 3};
  Mlp() { register_modules({{"f1", f1}, {"f2", f2}}); }
  Tensor forward(const Tensor& x) override { return f2.forward(tanh(f1.forward(x))); }
};

void copy_params(nn::Module& dst, const nn::Module& src) {
  auto d = dst.parameters(), s = src.parameters();
  for (size_t i = 0; i < d.size(); ++i) kernels::copy_(d[i], s[i]);
}

// All parameters (or gradients) of a module as one flat f32 vector.
std::vector<float> flat(const nn::Module& m, bool grads = false) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    Tensor t = grads ? p.grad() : p;
    auto v = t.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// True when every rank holds exactly these bits.
bool same_on_all_ranks(dist::ProcessGroup& pg, const std::vector<float>& v) {
  Tensor mine = from_vector<float>(v, {static_cast<int64_t>(v.size())});
  Tensor all = pg.all_gather(mine);
  const float* a = all.data<float>();
  bool same = true;
  for (int r = 0; r < pg.size(); ++r) same = same && std::memcmp(a, a + r * v.size(), v.size() * sizeof(float)) == 0;
  return same;
}

// max over elements of |a - b| / (rtol |b| + atol): <= 1 means within tolerance. The two runs
// sum the batch in different orders, so they differ by rounding; atol = 1e-7 (100x tighter
// than the usual fp32 atol of 1e-5) only matters for elements within ~0.1 of zero, where
// no relative tolerance is meaningful.
double worst_ratio(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double err = std::fabs(static_cast<double>(a[i]) - b[i]);
    worst = std::max(worst, err / (rtol * std::fabs(static_cast<double>(b[i])) + atol));
  }
  return worst;  // <= 1: within tolerance
}

// The fixed global batch of step `s` (same on every rank) and this rank's rows of it.
struct Batch {
  Tensor x, y;
};
Batch global_batch(int step, int64_t rows) {
  Generator g(1000 + static_cast<uint64_t>(step));
  return {randn({rows, 6}, {}, &g), randn({rows, 3}, {}, &g)};
}
Batch my_rows(const Batch& b, int rank, int64_t per_rank) {
  return {b.x.narrow(0, rank * per_rank, per_rank).contiguous(), b.y.narrow(0, rank * per_rank, per_rank).contiguous()};
}

template <class Opt, class Options>
void train_and_compare(dist::ProcessGroup& pg, const char* what, Options oo, double rtol, dist::ReducerOptions ro) {
  const int W = pg.size();
  const int64_t b = 4;
  Mlp ref, dp;
  copy_params(dp, ref);
  dist::Reducer reducer(dp.named_parameters(), pg, ro);
  Opt ref_opt(ref.parameters(), oo), dp_opt(dp.parameters(), oo);
  double worst = 0;
  for (int step = 0; step < 12; ++step) {
    Batch all = global_batch(step, W * b);
    Batch mine = my_rows(all, pg.rank(), b);
    ref_opt.zero_grad();
    mse_loss(ref.forward(all.x), all.y).backward();
    ref_opt.step();
    dp_opt.zero_grad();
    mse_loss(dp.forward(mine.x), mine.y).backward();
    dp_opt.step();
    auto got = flat(dp), want = flat(ref);
    double r = worst_ratio(got, want, rtol, 1e-7);
    worst = std::max(worst, r);
    CHECK(r <= 1.0, what, " step ", step, ": parameters differ from the one-process run by ", r, " x tolerance");
    CHECK(same_on_all_ranks(pg, got), what, " step ", step, ": ranks hold different parameters");
  }
  if (pg.rank() == 0)
    std::printf("%s: %d ranks, %zu buckets, 12 steps: worst |dp-ref| / (%g |ref| + 1e-7) = %.3f; ranks bit-identical\n",
                what, W, reducer.buckets().size(), rtol, worst);
}

void equivalence(dist::ProcessGroup& pg) {
  train_and_compare<optim::SGD>(pg, "SGD", optim::SGDOptions{.lr = 0.1}, 1e-6,
                                {.bucket_cap_mb = 0.0004, .first_bucket_mb = 0.0001});
  train_and_compare<optim::SGD>(pg, "SGD momentum", optim::SGDOptions{.lr = 0.05, .momentum = 0.9}, 1e-6, {});
  train_and_compare<optim::Adam>(pg, "Adam", optim::AdamOptions{.lr = 0.01}, 1e-5,
                                 {.bucket_cap_mb = 0, .first_bucket_mb = 0});
}

void no_sync(dist::ProcessGroup& pg) {
  const int W = pg.size();
  const int64_t b = 3;
  Mlp ref, dp;
  copy_params(dp, ref);
  dist::Reducer reducer(dp.named_parameters(), pg, {.bucket_cap_mb = 0.0004, .first_bucket_mb = 0.0001});
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.1}), dp_opt(dp.parameters(), {.lr = 0.1});
  for (int step = 0; step < 3; ++step) {
    ref_opt.zero_grad();
    dp_opt.zero_grad();
    for (int micro = 0; micro < 2; ++micro) {
      Batch all = global_batch(10 * step + micro, W * b);
      Batch mine = my_rows(all, pg.rank(), b);
      mse_loss(ref.forward(all.x), all.y).backward();  // accumulates: the doubled batch
      reducer.set_sync(micro == 1);
      mse_loss(dp.forward(mine.x), mine.y).backward();
      auto g = flat(dp, true);
      if (micro == 0) {
        CHECK(!same_on_all_ranks(pg, g), "step ", step, ": gradients agree across ranks under no_sync");
      } else {
        CHECK(same_on_all_ranks(pg, g), "step ", step, ": gradients differ across ranks after the synced backward");
        double r = worst_ratio(g, flat(ref, true), 1e-6, 1e-7);
        CHECK(r <= 1.0, "step ", step, ": accumulated gradients differ from the doubled batch's by ", r,
              " x tolerance");
      }
    }
    ref_opt.step();
    dp_opt.step();
    double r = worst_ratio(flat(dp), flat(ref), 1e-6, 1e-7);
    CHECK(r <= 1.0, "step ", step, ": parameters differ by ", r, " x tolerance");
  }
  if (pg.rank() == 0) std::printf("no_sync: %d ranks, 3 steps x 2 micro-batches OK\n", W);
}

// A deeper MLP whose gradients span many small buckets.
struct Deep : nn::Module {
  std::vector<std::unique_ptr<nn::Linear>> layers;
  Deep() {
    for (int k = 0; k < 8; ++k) {
      layers.push_back(std::make_unique<nn::Linear>(96, 96));
      register_module(std::string("l").append(std::to_string(k)), *layers.back());
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (auto& l : layers) h = tanh(l->forward(h));
    return h;
  }
};

void checkpointed(dist::ProcessGroup& pg) {
  const int W = pg.size();
  const int64_t b = 4;
  Deep ref, dp;
  copy_params(dp, ref);
  dist::Reducer reducer(dp.named_parameters(), pg, {.bucket_cap_mb = 0.0004, .first_bucket_mb = 0.0001});
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.1}), dp_opt(dp.parameters(), {.lr = 0.1});
  double worst = 0;
  for (int step = 0; step < 6; ++step) {
    Generator g(2000 + static_cast<uint64_t>(step));
    Tensor x = randn({W * b, 96}, {}, &g), y = randn({W * b, 96}, {}, &g);
    Tensor mx = x.narrow(0, pg.rank() * b, b).contiguous(), my = y.narrow(0, pg.rank() * b, b).contiguous();
    ref_opt.zero_grad();
    mse_loss(ref.forward(x), y).backward();
    ref_opt.step();
    dp_opt.zero_grad();
    Tensor h = mx;
    for (auto& layer : dp.layers) {
      nn::Linear* l = layer.get();
      h = autograd::checkpoint([l](const Tensor& t) { return tanh(l->forward(t)); }, h);
    }
    mse_loss(h, my).backward();
    dp_opt.step();
    auto got = flat(dp), want = flat(ref);
    const double r = worst_ratio(got, want, 1e-5, 1e-7);
    worst = std::max(worst, r);
    CHECK(r <= 1.0, "checkpoint step ", step, ": parameters differ from the one-process run by ", r, " x tolerance");
    CHECK(same_on_all_ranks(pg, got), "checkpoint step ", step, ": ranks hold different parameters");
  }
  if (pg.rank() == 0)
    std::printf(
        "checkpoint: %d ranks, %zu buckets, 6 steps: worst |dp-ref| / (1e-5 |ref| + 1e-7) = %.3f; ranks "
        "bit-identical\n",
        W, reducer.buckets().size(), worst);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void buckets(dist::ProcessGroup& pg) {
  CHECK(trace_enabled(), "run this scenario with BRISK_TRACE set");
  Deep model;
  const double cap = 0.04;  // MiB: 41,943 B; one layer is 36,864 + 384 B
  dist::Reducer reducer(model.named_parameters(), pg, {.bucket_cap_mb = cap, .first_bucket_mb = cap});
  const bool shm = reducer.uses_shared_memory();
  const auto& bs = reducer.buckets();
  CHECK(bs.size() >= 5, "only ", bs.size(), " buckets");
  std::vector<size_t> order;
  for (const auto& bi : bs) {
    CHECK(bi.bytes <= cap * 1024 * 1024, "bucket of ", bi.bytes, " bytes");
    order.insert(order.end(), bi.params.begin(), bi.params.end());
  }
  const size_t n = model.parameters().size();
  CHECK(order.size() == n, order.size(), " params in buckets");
  for (size_t k = 0; k < order.size(); ++k) CHECK(order[k] == n - 1 - k, "bucket order ", order);

  optim::SGD opt(model.parameters(), {.lr = 0.01});
  Generator g(5);
  const int steps = 4;
  int overlapped_steps = 0;
  for (int step = 0; step < steps; ++step) {
    Tensor x = randn({16, 96}, {}, &g);
    opt.zero_grad();
    Tensor loss;
    {
      TraceSpan span("forward", "compute");
      Tensor y = model.forward(x);
      loss = mul(y, y).mean();
    }
    {
      TraceSpan span("backward", "compute");
      loss.backward();
    }
    {
      TraceSpan span("optimizer step", "compute");
      opt.step();
    }
    const auto& ev = reducer.last_step_events();
    CHECK(ev.size() == bs.size(), ev.size(), " events");
    size_t early = 0;
    for (size_t k = 0; k < ev.size(); ++k) {
      CHECK(ev[k].bucket == k, "event order");
      CHECK(ev[k].start_us <= ev[k].end_us, "event times");
      if (ev[k].start_us < reducer.last_backward_end_us()) ++early;
    }
    if (shm) {
      // Shared memory: one all-reduce of every bucket once the backward ended.
      CHECK(early == 0, "step ", step, ": ", early, " shared-memory all-reduces began before the backward ended");
    } else {
      // Bucket 0 (the last layer) is launched from a hook while the earlier layers' gradients
      // are still being computed.
      CHECK(early >= 1, "step ", step, ": no all-reduce started before the backward ended");
      // ... and bucket 0 went out while the earlier layers' gradients were still being computed.
      CHECK(!ev.empty() && ev.front().start_us < ev.back().start_us, "step ", step,
            ": the first bucket was not launched before the last");
    }
    overlapped_steps += early >= 1;
    if (pg.rank() == 0)
      std::printf("step %d: %zu of %zu buckets launched before the backward ended\n", step, early, ev.size());
  }
  CHECK(same_on_all_ranks(pg, flat(model)), "ranks hold different parameters");

  // The trace file: spans of every bucket on the communication thread, the first of each
  // step before that step's "reducer finalize" began.
  const std::string file = trace_flush();
  json::Value doc = json::parse(read_file(file));
  std::vector<double> finalize_ts, bucket_ts, shm_ts;
  int forward = 0, backward = 0;
  std::vector<double> launch0_ts;
  for (const auto& e : doc.at("traceEvents").as_array()) {
    if (e.at("ph").as_string() == "i" && e.at("name").as_string() == "launch bucket 0")
      launch0_ts.push_back(e.at("ts").as_double());
    if (e.at("ph").as_string() != "X") continue;
    CHECK(e.at("pid").as_int() == pg.rank(), "pid");
    const std::string name = e.at("name").as_string();
    if (name == "reducer finalize") finalize_ts.push_back(e.at("ts").as_double());
    if (name == "shared-memory all_reduce") {
      CHECK(e.at("tid").as_int() == kTraceComputeTid, "shared-memory span tid");
      shm_ts.push_back(e.at("ts").as_double());
    }
    if (name.rfind("all_reduce bucket ", 0) == 0) {
      CHECK(e.at("tid").as_int() == kTraceCommTid, "bucket span tid");
      CHECK(e.at("cat").as_string() == "comm", "bucket span category");
      bucket_ts.push_back(e.at("ts").as_double());
    }
    forward += name == "forward";
    backward += name == "backward";
  }
  CHECK(forward == steps && backward == steps, forward, " forward / ", backward, " backward spans");
  CHECK(finalize_ts.size() == static_cast<size_t>(steps), finalize_ts.size(), " finalize spans");
  if (shm) {
    CHECK(bucket_ts.empty() && shm_ts.size() == static_cast<size_t>(steps), bucket_ts.size(), " bucket spans, ",
          shm_ts.size(), " shared-memory spans");
    std::sort(shm_ts.begin(), shm_ts.end());
    std::sort(finalize_ts.begin(), finalize_ts.end());
    for (size_t s = 0; s < finalize_ts.size() && s < shm_ts.size(); ++s)
      CHECK(shm_ts[s] >= finalize_ts[s], "trace step ", s, ": the shared-memory all-reduce began at ", shm_ts[s],
            " us, before the backward ended at ", finalize_ts[s], " us");
    if (pg.rank() == 0)
      std::printf("buckets: %zu buckets in shared memory, %d steps, trace %s OK\n", bs.size(), steps, file.c_str());
    return;
  }
  CHECK(bucket_ts.size() == steps * bs.size(), bucket_ts.size(), " bucket spans");
  std::sort(bucket_ts.begin(), bucket_ts.end());
  std::sort(finalize_ts.begin(), finalize_ts.end());
  CHECK(launch0_ts.size() == static_cast<size_t>(steps), launch0_ts.size(), " launches of bucket 0");
  for (size_t s = 0; s < finalize_ts.size() && s < launch0_ts.size(); ++s)
    CHECK(launch0_ts[s] < finalize_ts[s], "trace step ", s, ": bucket 0 launched at ", launch0_ts[s],
          " us, after the backward ended at ", finalize_ts[s], " us");
  for (size_t s = 0; s < finalize_ts.size() && s * bs.size() < bucket_ts.size(); ++s)
    CHECK(bucket_ts[s * bs.size()] < finalize_ts[s], "trace step ", s, ": first all-reduce at ",
          bucket_ts[s * bs.size()], " us, backward ended at ", finalize_ts[s], " us");
  if (pg.rank() == 0)
    std::printf("buckets: %zu buckets, %d/%d steps overlapped, trace %s OK\n", bs.size(), overlapped_steps, steps,
                file.c_str());
}

struct Three : nn::Module {
  nn::Linear f1{4, 4}, f2{4, 4}, f3{4, 4}, f4{4, 4};
  Three() { register_modules({{"f1", f1}, {"f2", f2}, {"f3", f3}, {"f4", f4}}); }
  Tensor forward(const Tensor& x) override { return f2.forward(tanh(f1.forward(x))); }
};

void unused(dist::ProcessGroup& pg) {
  const int W = pg.size();
  Generator g(3);
  Tensor x = randn({5, 4}, {}, &g);
  {
    Three m;
    dist::Reducer reducer(m.named_parameters(), pg);
    std::string msg;
    try {
      m.forward(x).sum().backward();
    } catch (const Error& e) {
      msg = e.what();
    }
    CHECK(msg.find("Reducer: parameters [f3.weight, f3.bias, f4.weight, f4.bias] got no gradient") != std::string::npos,
          "message: ", msg);
    CHECK(msg.find("find_unused_parameters") != std::string::npos, msg);
  }
  {
    // f3 used by rank 0 only, f4 by nobody.
    Three m;
    dist::Reducer reducer(m.named_parameters(), pg, {.find_unused_parameters = true});
    for (int step = 0; step < 2; ++step) {
      for (const Tensor& p : m.parameters()) p.set_grad(Tensor());
      Tensor out = m.forward(x);
      if (pg.rank() == 0) out = add(out, m.f3.forward(x));
      out.sum().backward();
      // f3's gradient: rank 0's local one averaged with W - 1 zeros, on every rank (the bias
      // gradient of sum(x W^T + b) over 5 rows is 5).
      CHECK(m.f3.bias.grad().defined(), "f3.bias has no gradient on rank ", pg.rank());
      if (m.f3.bias.grad().defined())
        for (float v : m.f3.bias.grad().to_vector<float>()) CHECK(v == 5.0f / W, "f3.bias grad ", v);
      CHECK(!m.f4.weight.grad().defined(), "f4 (unused everywhere) got a gradient");
      CHECK(same_on_all_ranks(pg, std::vector<float>(m.f3.weight.grad().to_vector<float>())), "f3 grads differ");
    }
  }
  {
    // Half-precision gradients: rank r's gradient is r + 1 everywhere; the average is (W + 1) / 2.
    Tensor h = kernels::cast(zeros({6}), DType::F16), bf = kernels::cast(zeros({6}), DType::BF16);
    h.requires_grad_();
    bf.requires_grad_();
    dist::Reducer reducer({{"h", h}, {"bf", bf}}, pg, {.bucket_cap_mb = 0, .first_bucket_mb = 0});
    Tensor c = full({}, static_cast<double>(pg.rank() + 1));
    add(mul(h.to(DType::F32).sum(), c), mul(bf.to(DType::F32).sum(), c)).backward();
    CHECK(h.grad().dtype() == DType::F16 && bf.grad().dtype() == DType::BF16, "grad dtypes");
    for (double v : h.grad().to_vector<double>()) CHECK(v == (W + 1) / 2.0, "f16 grad ", v);
    for (double v : bf.grad().to_vector<double>()) CHECK(v == (W + 1) / 2.0, "bf16 grad ", v);
  }
  if (pg.rank() == 0) std::printf("unused + f16/bf16: %d ranks OK\n", W);
}

// --- the unit tests' cases in a world of W ----------------------------------------------------

Tensor leaf_param(const Shape& s) {
  Tensor t = zeros(s);
  t.requires_grad_();
  return t;
}

// Loss = sum_k (k + 1)(r + 1) sum(p_k): on rank r the gradient of p_k is (k + 1)(r + 1).
Tensor rank_weighted_sum(const std::vector<Tensor>& ps, int rank) {
  Tensor loss;
  for (size_t k = 0; k < ps.size(); ++k) {
    Tensor term = mul(ps[k].sum(), full({}, static_cast<double>((k + 1) * static_cast<size_t>(rank + 1))));
    loss = loss.defined() ? add(loss, term) : term;
  }
  return loss;
}

std::vector<std::pair<std::string, Tensor>> named_params(const std::vector<Tensor>& ps) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < ps.size(); ++k) out.emplace_back(std::string("p").append(std::to_string(k)), ps[k]);
  return out;
}

void expect_grad_value(const Tensor& p, double want, const std::string& what) {
  CHECK(p.grad().defined(), what, ": no gradient");
  if (!p.grad().defined()) return;
  for (double g : p.grad().to_vector<double>()) {
    if (g != want) {
      CHECK(g == want, what, ": gradient ", g, ", expected ", want);
      return;
    }
  }
}

void world(dist::ProcessGroup& pg) {
  const int W = pg.size(), r = pg.rank();
  const double avg = (W + 1) / 2.0;  // mean of (r + 1) over the ranks
  {
    // Averaged gradients at the end of backward, one event per bucket, in bucket order.
    std::vector<Tensor> ps = {leaf_param({3}), leaf_param({2, 2}), leaf_param({5}), leaf_param({1})};
    dist::Reducer red(named_params(ps), pg, {.bucket_cap_mb = 0, .first_bucket_mb = 0});
    rank_weighted_sum(ps, r).backward();
    for (size_t k = 0; k < ps.size(); ++k)
      expect_grad_value(ps[k], static_cast<double>(k + 1) * avg, std::string("averaged p").append(std::to_string(k)));
    const auto& ev = red.last_step_events();
    CHECK(ev.size() == 4, ev.size(), " events");
    for (size_t k = 0; k < ev.size(); ++k) {
      CHECK(ev[k].bucket == k, "event ", k, " is bucket ", ev[k].bucket);
      CHECK(ev[k].start_us <= ev[k].end_us, "event times");
      if (red.uses_shared_memory()) {
        CHECK(ev[k].start_us >= red.last_backward_end_us(), "bucket ", k, " reduced before the backward ended");
      } else {
        CHECK(ev[k].start_us <= red.last_backward_end_us(), "bucket ", k, " launched after the backward ended");
      }
    }
    red.finalize();  // idempotent
    expect_grad_value(ps[3], 4 * avg, "after a second finalize");
  }
  {
    // Hooks fire for p0 first; buckets still go out in bucket order on every rank (or the
    // ranks would pair different buckets and average the wrong numbers).
    std::vector<Tensor> ps = {leaf_param({2}), leaf_param({3}), leaf_param({4})};
    dist::Reducer red(named_params(ps), pg, {.bucket_cap_mb = 0, .first_bucket_mb = 0});
    const Tensor c = full({}, static_cast<double>(r + 1));
    Tensor h = mul(ps[2].sum(), mul(c, full({}, 3.0)));
    h = add(h, mul(ps[1].sum(), mul(c, full({}, 2.0))));
    h = add(h, mul(ps[0].sum(), c));
    h.backward();
    for (size_t k = 0; k < 3; ++k)
      expect_grad_value(ps[k], static_cast<double>(k + 1) * avg, std::string("hook order p").append(std::to_string(k)));
    const auto& ev = red.last_step_events();
    CHECK(ev.size() == 3, ev.size(), " events");
    for (size_t k = 0; k < ev.size(); ++k) CHECK(ev[k].bucket == k, "bucket order");
  }
  {
    // no_sync: the local gradient stays local (and differs across ranks); the next synced
    // pass averages the accumulated sum.
    std::vector<Tensor> ps = {leaf_param({3}), leaf_param({2})};
    dist::Reducer red(named_params(ps), pg);
    red.set_sync(false);
    rank_weighted_sum(ps, r).backward();
    CHECK(red.last_step_events().empty(), "communicated under no_sync");
    expect_grad_value(ps[1], 2.0 * (r + 1), "no_sync local gradient");
    CHECK(W == 1 || !same_on_all_ranks(pg, ps[1].grad().to_vector<float>()), "no_sync gradients agree across ranks");
    red.set_sync(true);
    rank_weighted_sum(ps, r).backward();
    CHECK(red.last_step_events().size() == 1, red.last_step_events().size(), " events");
    expect_grad_value(ps[0], 2 * avg, "synced after no_sync p0");
    expect_grad_value(ps[1], 4 * avg, "synced after no_sync p1");
  }
  {
    // Two synced passes before a step: each reduces once, the sum of both is averaged.
    std::vector<Tensor> ps = {leaf_param({3}), leaf_param({2})};
    dist::Reducer red(named_params(ps), pg, {.bucket_cap_mb = 0, .first_bucket_mb = 0});
    rank_weighted_sum(ps, r).backward();
    rank_weighted_sum(ps, r).backward();
    CHECK(red.last_step_events().size() == 2, red.last_step_events().size(), " events in the second pass");
    expect_grad_value(ps[0], 2 * avg, "two passes p0");
    expect_grad_value(ps[1], 4 * avg, "two passes p1");
  }
  {
    // A pass that throws half-way (on every rank) leaves the next one intact: same pairing of
    // collectives, averaged gradients.
    Tensor a = leaf_param({2}), b = leaf_param({2});
    dist::Reducer red({{"a", a}, {"b", b}}, pg, {.bucket_cap_mb = 0, .first_bucket_mb = 0});
    bool fail = true;
    a.register_hook([&](const Tensor&) {
      if (fail) BRISK_THROW("boom");
    });
    std::string msg;
    try {
      rank_weighted_sum({a, b}, r).backward();
    } catch (const Error& e) {
      msg = e.what();
    }
    CHECK(msg.find("boom") != std::string::npos, "the hook's error was lost: '", msg, "'");
    fail = false;
    a.set_grad(Tensor());
    b.set_grad(Tensor());
    rank_weighted_sum({a, b}, r).backward();
    expect_grad_value(a, avg, "after a failed pass, a");
    expect_grad_value(b, 2 * avg, "after a failed pass, b");
    CHECK(red.last_step_events().size() == 2, red.last_step_events().size(), " events after a failed pass");
    CHECK(same_on_all_ranks(pg, a.grad().to_vector<float>()), "ranks disagree after a failed pass");
  }
  {
    // A destroyed Reducer leaves backward alone: gradients stay local.
    Tensor a = leaf_param({2});
    { dist::Reducer red({{"a", a}}, pg); }
    a.sum().backward();
    expect_grad_value(a, 1.0, "after the reducer was destroyed");
  }
  if (r == 0) std::printf("world: %d ranks, averaged gradients in every unit-test case OK\n", W);
}

// Trains the Mlp 3 steps (Adam) with the given mode; returns the parameters.
std::vector<float> train_mode(dist::ProcessGroup& pg, dist::ReducerMode mode, bool* shm) {
  Mlp m;
  Generator init(77);
  for (auto& p : m.parameters()) kernels::copy_(p, randn(p.sizes(), {}, &init));
  dist::Reducer red(m.named_parameters(), pg, {.bucket_cap_mb = 0.0004, .first_bucket_mb = 0.0001, .mode = mode});
  *shm = red.uses_shared_memory();
  optim::Adam opt(m.parameters(), {.lr = 0.01});
  for (int step = 0; step < 3; ++step) {
    Batch mine = my_rows(global_batch(step, static_cast<int64_t>(pg.size()) * 4), pg.rank(), 4);
    opt.zero_grad();
    mse_loss(m.forward(mine.x), mine.y).backward();
    opt.step();
  }
  return flat(m);
}

void shm(dist::ProcessGroup& pg) {
  const int W = pg.size(), r = pg.rank();
  const double avg = (W + 1) / 2.0;
  const char* env = std::getenv("BRISK_REDUCER_MODE");
  {
    Tensor a = leaf_param({2});
    dist::Reducer red({{"a", a}}, pg);
    if (env && std::string(env) == "shm") CHECK(red.uses_shared_memory(), "BRISK_REDUCER_MODE=shm was not used");
    if (env && std::string(env) == "overlap")
      CHECK(!red.uses_shared_memory(), "BRISK_REDUCER_MODE=overlap was not used");
  }
  bool used = false;
  const auto via_shm = train_mode(pg, dist::ReducerMode::SharedMemory, &used);
  CHECK(used, "ReducerMode::SharedMemory did not use shared memory");
  const auto via_mpi = train_mode(pg, dist::ReducerMode::Overlap, &used);
  CHECK(!used, "ReducerMode::Overlap used shared memory");
  // Two ranks: a + b either way, the same bits. More: shared memory adds in rank order, MPI in
  // an order of its own, so the sums may differ in the last bit.
  if (W == 2) {
    CHECK(via_shm == via_mpi, "3 Adam steps through shared memory differ from the overlap mode's bits");
  } else {
    const double ratio = worst_ratio(via_shm, via_mpi, 1e-5, 1e-7);
    CHECK(ratio <= 1.0, "3 Adam steps through shared memory differ from the overlap mode's by ", ratio, " x tolerance");
  }
  CHECK(same_on_all_ranks(pg, via_shm), "ranks hold different parameters after shared-memory training");
  {
    // Every floating dtype, in buckets of its own; gradients outlive the Reducer (they are
    // views of its shared buckets, which stay mapped while anything views them).
    std::vector<Tensor> ps;
    for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
      Tensor p = zeros({33}, {.dtype = dt});
      p.requires_grad_();
      ps.push_back(p);
    }
    {
      dist::Reducer red(named_params(ps), pg, {.mode = dist::ReducerMode::SharedMemory});
      CHECK(red.buckets().size() == 4, red.buckets().size(), " buckets for 4 dtypes");
      rank_weighted_sum(ps, r).backward();
    }
    for (size_t k = 0; k < ps.size(); ++k)
      expect_grad_value(ps[k], static_cast<double>(k + 1) * avg,
                        std::string("after the Reducer went, ") + dtype_name(ps[k].dtype()));
    // Without the Reducer, gradients accumulate locally into the same tensors.
    rank_weighted_sum(ps, r).backward();
    expect_grad_value(ps[0], avg + (r + 1), "local accumulation after the Reducer went");
  }
  {
    // A second Reducer over the same parameters, after the first is gone: a new segment.
    Tensor a = leaf_param({5});
    for (int k = 0; k < 2; ++k) {
      dist::Reducer red({{"a", a}}, pg, {.mode = dist::ReducerMode::SharedMemory});
      a.set_grad(Tensor());
      rank_weighted_sum({a}, r).backward();
      expect_grad_value(a, avg, std::string("Reducer ").append(std::to_string(k)));
    }
  }
  if (r == 0)
    std::printf("shm: %d ranks, modes, dtypes, gradients outliving the Reducer, same bits as overlap OK\n", W);
}

// rank 1 never runs (shm_late) or leaves before (shm_exit) the synced backward rank 0 waits in.
void shm_failure(dist::ProcessGroup& pg, bool exit_early) {
  Tensor a = leaf_param({4});
  dist::Reducer red({{"a", a}}, pg, {.mode = dist::ReducerMode::SharedMemory});
  if (pg.rank() == 1) {
    if (exit_early) std::_Exit(0);  // no goodbye to the group: as if killed
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return;
  }
  a.sum().backward();
  CHECK(false, "rank 0's backward returned although rank 1 never joined it");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: reducer_worker equivalence|no_sync|buckets|unused|checkpoint|world|shm|shm_late|shm_exit\n");
    return 2;
  }
  const std::string scenario = argv[1];
  try {
    auto& pg = dist::init();
    g_rank = pg.rank();
    if (scenario == "equivalence") {
      equivalence(pg);
    } else if (scenario == "no_sync") {
      no_sync(pg);
    } else if (scenario == "buckets") {
      buckets(pg);
    } else if (scenario == "unused") {
      unused(pg);
    } else if (scenario == "checkpoint") {
      checkpointed(pg);
    } else if (scenario == "world") {
      world(pg);
    } else if (scenario == "shm") {
      shm(pg);
    } else if (scenario == "shm_late" || scenario == "shm_exit") {
      shm_failure(pg, scenario == "shm_exit");
    } else {
      std::fprintf(stderr, "reducer_worker: unknown scenario %s\n", scenario.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", g_rank, e.what());
    return 1;
  }
  if (g_failures) {
    std::fprintf(stderr, "[rank %d] %d check(s) failed\n", g_rank, g_failures);
    return 1;
  }
  return 0;
}
