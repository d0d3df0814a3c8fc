// The program the multi-process tests start under mpirun (and once without it): each
// scenario checks one behaviour of dist::ProcessGroup on every rank and exits non-zero
// when any check failed. `dist_worker SCENARIO [ARG] [--token=...]` (the token only marks
// the processes so the test can find leftovers).
#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>

#include <sys/resource.h>
#include <unistd.h>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>

using namespace brisk;
using dist::ReduceOp;

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

const std::vector<DType> kDTypes = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::F64};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};

Tensor make(const std::vector<double>& v, DType dt, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return kernels::cast(from_vector<double>(v, s), dt);
}
std::vector<double> values(const Tensor& t) {
  return t.to_vector<double>();
}

// What `x` becomes when stored as dt (u8 wraps modulo 256 like the C cast MPI uses).
double as_dtype(double x, DType dt) {
  if (dt == DType::U8) return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(x) & 0xff));
  return values(make({x}, dt))[0];
}

void expect_equal(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  CHECK(got.size() == want.size(), what, ": ", got.size(), " values, expected ", want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (got[i] != want[i]) {
      CHECK(got[i] == want[i], what, ": element ", i, " is ", got[i], ", expected ", want[i]);
      return;
    }
  }
}

// Rank r's input element i: small integers, exact in every dtype, so every expected value
// below is exact too.
double input(int r, int64_t i) {
  return 1 + r + static_cast<double>(i % 3);
}
double prod_input(int r, int64_t i) {
  return 1 + (r + i) % 2;
}

// --- scenarios ------------------------------------------------------------------------------

void every_collective(dist::ProcessGroup& pg) {
  const int W = pg.size(), me = pg.rank();
  const int64_t n = 5;
  for (DType dt : kDTypes) {
    const std::string dn = dtype_name(dt);
    for (ReduceOp op : kOps) {
      std::vector<double> mine(n), want(n);
      for (int64_t i = 0; i < n; ++i) {
        double acc = op == ReduceOp::Prod ? 1 : (op == ReduceOp::Max ? -1e9 : op == ReduceOp::Min ? 1e9 : 0);
        for (int r = 0; r < W; ++r) {
          double x = op == ReduceOp::Prod ? prod_input(r, i) : input(r, i);
          if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += x;
          if (op == ReduceOp::Prod) acc *= x;
          if (op == ReduceOp::Max) acc = std::max(acc, x);
          if (op == ReduceOp::Min) acc = std::min(acc, x);
        }
        if (op == ReduceOp::Avg) acc = is_floating(dt) ? acc / W : std::trunc(acc / W);
        want[static_cast<size_t>(i)] = as_dtype(acc, dt);
        mine[static_cast<size_t>(i)] = op == ReduceOp::Prod ? prod_input(me, i) : input(me, i);
      }
      Tensor t = make(mine, dt, {n});
      pg.all_reduce(t, {.op = op});
      expect_equal(values(t), want, "all_reduce " + std::string(dist::reduce_op_name(op)) + " " + dn);

      // reduce to the last rank: only the root changes.
      Tensor u = make(mine, dt, {n});
      pg.reduce(u, {.root = W - 1, .op = op});
      expect_equal(values(u), me == W - 1 ? want : values(make(mine, dt)),
                   "reduce " + std::string(dist::reduce_op_name(op)) + " " + dn);
    }
    // broadcast from each root
    for (int root = 0; root < W; ++root) {
      Tensor t = make({double(me), double(me + 1), 7}, dt);
      pg.broadcast(t, {.root = root});
      expect_equal(values(t), {double(root), double(root + 1), 7}, "broadcast root " + std::to_string(root) + " " + dn);
    }
    // all_gather / gather: rank r's block is (2, 2) of input(r, i)
    std::vector<double> block(4), stacked;
    for (int64_t i = 0; i < 4; ++i) block[static_cast<size_t>(i)] = input(me, i);
    for (int r = 0; r < W; ++r)
      for (int64_t i = 0; i < 4; ++i) stacked.push_back(input(r, i));
    Tensor in = make(block, dt, {2, 2});
    Tensor all = pg.all_gather(in);
    CHECK((all.sizes() == Shape{int64_t{2} * W, 2}), "all_gather shape ", all.sizes());
    expect_equal(values(all), stacked, "all_gather " + dn);
    Tensor g = me == 0 ? empty({int64_t{2} * W, 2}, dt) : Tensor();
    pg.gather(g, in, 0);
    if (me == 0) expect_equal(values(g), stacked, "gather " + dn);
    // scatter from the last rank: block r = input(r, .)
    Tensor s_out = empty({2, 2}, dt);
    Tensor s_in = me == W - 1 ? make(stacked, dt, {int64_t{2} * W, 2}) : Tensor();
    pg.scatter(s_out, s_in, W - 1);
    expect_equal(values(s_out), block, "scatter " + dn);
    // reduce_scatter (sum): every rank contributes `stacked` scaled by (rank+1) -> block me
    // summed = block * W(W+1)/2
    std::vector<double> rs_in;
    rs_in.reserve(stacked.size());
    for (double x : stacked) rs_in.push_back(x * (me + 1));
    Tensor rs_out = empty({2, 2}, dt);
    pg.reduce_scatter(rs_out, make(rs_in, dt, {int64_t{2} * W, 2}));
    std::vector<double> rs_want;
    rs_want.reserve(block.size());
    for (double x : block) rs_want.push_back(as_dtype(x * W * (W + 1) / 2, dt));
    expect_equal(values(rs_out), rs_want, "reduce_scatter " + dn);
    // all_to_all: block j sent by rank r is (10 r + j); rank me receives (10 j + me) from j
    std::vector<double> a_in, a_want;
    for (int j = 0; j < W; ++j) {
      a_in.push_back(10 * me + j);
      a_want.push_back(10 * j + me);
    }
    Tensor a_out = empty({W}, dt);
    pg.all_to_all(a_out, make(a_in, dt));
    expect_equal(values(a_out), a_want, "all_to_all " + dn);
    // send/recv round a ring
    Tensor msg = make({double(me), 2, 3}, dt), got = empty({3}, dt);
    auto rw = pg.recv_async(got, (me + W - 1) % W, 5);
    pg.send(msg, (me + 1) % W, 5);
    rw->wait();
    expect_equal(values(got), {double((me + W - 1) % W), 2, 3}, "send/recv " + dn);
  }
  pg.barrier();
}

// Accelerate's table for 2 ranks: input arange(N) + 1 + N * rank.
void accelerate_table(dist::ProcessGroup& pg) {
  const int N = pg.size(), me = pg.rank();
  for (DType dt : {DType::F32, DType::I64}) {
    auto input_t = [&] { return kernels::cast(arange(1 + N * me, 1 + N * me + N, 1, {.dtype = DType::F64}), dt); };
    std::vector<double> all;
    for (int i = 1; i <= N * N; ++i) all.push_back(i);
    expect_equal(values(pg.all_gather(input_t())), all, "gather -> 1..N^2");
    Tensor b = input_t();
    pg.broadcast(b);
    std::vector<double> first;
    for (int i = 1; i <= N; ++i) first.push_back(i);
    expect_equal(values(b), first, "broadcast -> 1..N");
    if (N == 2) {
      Tensor s = input_t(), m = input_t(), x = input_t();
      pg.all_reduce(s, {.op = ReduceOp::Sum});
      pg.all_reduce(m, {.op = ReduceOp::Avg});
      pg.all_reduce(x, {.op = ReduceOp::Max});
      expect_equal(values(s), {4, 6}, "sum reduce [4, 6]");
      expect_equal(values(m), {2, 3}, "mean [2, 3]");
      expect_equal(values(x), {3, 4}, "max [3, 4]");
    }
  }
}

void uneven_all_gather(dist::ProcessGroup& pg) {
  const int W = pg.size(), me = pg.rank();
  for (DType dt : {DType::F32, DType::I32, DType::BF16}) {
    // rank r has r+1 rows of 3: row k = [50 r + 5 k + 0, +1, +2] (exact in bf16)
    std::vector<double> mine;
    for (int k = 0; k <= me; ++k)
      for (int c = 0; c < 3; ++c) mine.push_back(50 * me + 5 * k + c);
    auto parts = pg.all_gather_uneven(make(mine, dt, {me + 1, 3}));
    CHECK(static_cast<int>(parts.size()) == W, "parts ", parts.size());
    for (int r = 0; r < W && r < static_cast<int>(parts.size()); ++r) {
      CHECK((parts[static_cast<size_t>(r)].sizes() == Shape{r + 1, 3}), "part ", r, " shape ",
            parts[static_cast<size_t>(r)].sizes());
      std::vector<double> want;
      for (int k = 0; k <= r; ++k)
        for (int c = 0; c < 3; ++c) want.push_back(50 * r + 5 * k + c);
      expect_equal(values(parts[static_cast<size_t>(r)]), want, "uneven part " + std::to_string(r));
    }
  }
  // An empty contribution is fine too.
  auto parts = pg.all_gather_uneven(empty({me == 0 ? 0 : 2, 4}, DType::F32));
  CHECK(parts[0].size(0) == 0 && (W < 2 || parts[1].size(0) == 2), "empty contribution");
}

// One chunk of the caller's own work while collectives are in flight: a sum whose value is
// known, so the work cannot be optimised away and is checked.
uint64_t work_chunk(uint64_t chunk) {
  uint64_t s = 0;
  for (uint64_t i = 0; i < 20000; ++i) s += (chunk * 20000 + i) % 7;
  return s;
}
uint64_t expected_work(uint64_t chunks) {
  uint64_t s = 0;
  for (uint64_t n = 0; n < chunks * 20000; ++n) s += n % 7;
  return s;
}

// With BRISK_COMM_GATE=1 a rank that arrives 1.5 s late is waited for asleep: the communication
// thread tests a nonblocking barrier between sleeps instead of spinning inside MPI's all-reduce,
// so the waiting processes spend well under half a core meanwhile (spinning, the default, costs
// a whole one and fails this). The result is right either way.
void late_peer(dist::ProcessGroup& pg) {
  const int W = pg.size(), me = pg.rank();
  Tensor t = full({1 << 18}, me + 1.0);
  pg.barrier();
  if (me == W - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto cpu_s = [] {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
  };
  const double c0 = cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  pg.all_reduce(t);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_s() - c0;
  auto v = values(t);
  CHECK(v.front() == W * (W + 1) / 2.0 && v.back() == W * (W + 1) / 2.0, "sum ", v.front());
  if (me != W - 1) {
    std::printf("[rank %d] waited %.2f s for the late rank using %.2f s of CPU\n", me, wall, cpu);
    CHECK(wall > 1.0, "the all-reduce returned after ", wall, " s, before the late rank arrived");
    CHECK(cpu < 0.5 * wall, "waiting ", wall, " s for a late rank cost ", cpu, " s of CPU: spinning, not sleeping");
  }
}

// Two outstanding collectives complete in submission order while the caller computes, and
// async send/recv in both directions at once do not deadlock.
void async_overlap(dist::ProcessGroup& pg) {
  const int W = pg.size(), me = pg.rank();
  Tensor big = full({1 << 20}, me + 1.0);
  Tensor small = full({3}, 10.0 * (me + 1));
  // The last rank joins 200 ms late, so on the others the collectives are certainly still in
  // flight while they compute.
  if (me == W - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto w1 = pg.all_reduce_async(big);
  auto w2 = pg.all_reduce_async(small, {.op = ReduceOp::Max});
  CHECK(w1->seq() + 1 == w2->seq(), "sequence numbers ", w1->seq(), " then ", w2->seq());
  // Overlap: this thread computes and only polls is_completed(), never wait(), so both
  // collectives must finish on the communication thread while the caller works.
  uint64_t chunks = 0, done_work = 0;
  bool in_order = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const bool second = w2->is_completed(), first = w1->is_completed();  // in this order: see below
    if (second && !first) in_order = false;  // w2 was done before w1 was: out of submission order
    if ((first && second) || std::chrono::steady_clock::now() > deadline) break;
    done_work += work_chunk(chunks++);
  }
  CHECK(w1->is_completed() && w2->is_completed(),
        "the collectives did not finish within 60 s while the caller computed: no progress without wait()");
  CHECK(in_order, "the later collective finished before the earlier one");
  CHECK(done_work == expected_work(chunks), "the caller's work went wrong: ", done_work);
  if (me != W - 1) CHECK(chunks >= 1, "no work done while the collectives were in flight (a peer joined 200 ms late)");
  const auto t0 = std::chrono::steady_clock::now();
  w2->wait();
  w1->wait();
  const double wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(wait_ms < 1000, "wait() on finished collectives took ", wait_ms, " ms");
  if (me == 0)
    std::printf("async: %llu chunks of work while 2 collectives were in flight\n", (unsigned long long)chunks);
  auto bv = values(big);
  CHECK(bv.front() == W * (W + 1) / 2.0 && bv.back() == W * (W + 1) / 2.0, "big sum ", bv.front());
  expect_equal(values(small), {10.0 * W, 10.0 * W, 10.0 * W}, "small max");
  // Both ranks send 4 MiB to each other before either receives.
  const int peer = me ^ 1;
  if (peer < W) {
    Tensor out = full({1 << 20}, double(me)), in = empty({1 << 20});
    auto s = pg.send_async(out, peer, 1);
    auto r = pg.recv_async(in, peer, 1);
    s->wait();
    r->wait();
    auto v = values(in);
    CHECK(v.front() == peer && v.back() == peer, "exchange got ", v.front());
  }
  // Many small async collectives back to back.
  std::vector<dist::WorkPtr> ws;
  std::vector<Tensor> ts;
  for (int i = 0; i < 50; ++i) {
    ts.push_back(full({4}, double(i)));
    ws.push_back(pg.all_reduce_async(ts.back()));
  }
  for (int i = 0; i < 50; ++i) {
    ws[static_cast<size_t>(i)]->wait();
    CHECK(values(ts[static_cast<size_t>(i)])[0] == double(i) * W, "async #", i);
  }
  // A receive whose size differs from the message fails with both sizes named.
}

// brisk's algorithms against MPI's: integers bit for bit, floats within rounding, and every
// rank holds bit-identical results.
void algorithms(dist::ProcessGroup& pg) {
  const int W = pg.size(), me = pg.rank();
  Generator gen(1234 + static_cast<uint64_t>(me));
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{(1 << 17) + 5}}) {
    for (DType dt : kDTypes) {
      for (ReduceOp op : kOps) {
        Tensor base;
        if (is_floating(dt)) {
          base = kernels::cast(op == ReduceOp::Prod ? rand({n}, {}, &gen) : randn({n}, {}, &gen), dt);
        } else {
          base = kernels::cast(randint(0, op == ReduceOp::Prod ? 3 : 50, {n}, {.dtype = DType::I64}, &gen), dt);
        }
        Tensor ref = base.clone();
        pg.all_reduce(ref, {.op = op, .algorithm = dist::Algorithm::Backend});
        for (auto algo : {dist::Algorithm::Ring, dist::Algorithm::Rhd}) {
          Tensor t = base.clone();
          pg.all_reduce(t, {.op = op, .algorithm = algo});
          std::string what = std::string(dist::algorithm_name(algo)) + " " + dist::reduce_op_name(op) + " " +
                             dtype_name(dt) + " n=" + std::to_string(n);
          auto got = values(t), want = values(ref);
          // Tolerance: one rounding of the dtype per rank added, relative to the magnitudes.
          const double eps = dt == DType::F16    ? 1e-3
                             : dt == DType::BF16 ? 8e-3
                             : dt == DType::F32  ? 1.2e-7
                             : dt == DType::F64  ? 2.3e-16
                                                 : 0;
          for (size_t i = 0; i < got.size(); ++i) {
            double tol = eps * W * 4 * (std::abs(want[i]) + 1);
            if (std::abs(got[i] - want[i]) > tol) {
              CHECK(false, what, ": element ", i, " is ", got[i], ", MPI says ", want[i]);
              break;
            }
          }
          // identical on every rank, bit for bit
          Tensor all = pg.all_gather(kernels::cast(t, dt).reshape({1, n}));
          const char* bytes = static_cast<const char*>(all.data_ptr());
          const size_t row = static_cast<size_t>(n) * dtype_size(dt);
          for (int r = 1; r < W; ++r)
            CHECK(std::memcmp(bytes, bytes + row * static_cast<size_t>(r), row) == 0, what, ": rank ", r,
                  " differs from rank 0");
        }
      }
    }
    // tree broadcast equals MPI's bit for bit, from every root
    for (int root = 0; root < W; ++root) {
      Tensor a = randn({n}, {}, &gen), b = a.clone();
      pg.broadcast(a, {.root = root, .algorithm = dist::Algorithm::Backend});
      pg.broadcast(b, {.root = root, .algorithm = dist::Algorithm::Tree});
      CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0, "tree broadcast n=", n, " root ", root);
    }
  }
  // The environment variable picks the algorithm when the call does not.
  setenv("BRISK_ALLREDUCE_ALGO", "ring", 1);
  Tensor t = full({10}, double(me));
  pg.all_reduce(t);
  CHECK(values(t)[0] == W * (W - 1) / 2.0, "env-selected ring");
  setenv("BRISK_ALLREDUCE_ALGO", "bogus", 1);
  bool threw = false;
  try {
    pg.all_reduce(t);
  } catch (const Error& e) {
    threw = std::string(e.what()).find("BRISK_ALLREDUCE_ALGO='bogus'") != std::string::npos;
  }
  CHECK(threw, "a bad BRISK_ALLREDUCE_ALGO is an error naming it");
  unsetenv("BRISK_ALLREDUCE_ALGO");
}

// Debug mode (OnError::Throw): rank 0 all-reduces while the others broadcast.
void debug_mismatch(dist::ProcessGroup& pg) {
  const int me = pg.rank();
  CHECK(pg.debug(), "BRISK_DEBUG=1 turns debug mode on");
  Tensor t = full({4}, 1.0);
  pg.all_reduce(t);  // matching collectives pass the check
  std::string msg;
  try {
    if (me == 0) {
      pg.all_reduce(t);
    } else {
      pg.broadcast(t);
    }
  } catch (const Error& e) {
    msg = e.what();
  }
  std::printf("[rank %d] mismatch error: %s\n", me, msg.c_str());
  for (const char* part : {"collective mismatch", "rank 0 called all_reduce #1 (f32, [4], sum)",
                           "rank 1 called broadcast #1 (f32, [4], root 0)"})
    CHECK(msg.find(part) != std::string::npos, "the error names '", part, "': ", msg);
  bool unusable = false;
  try {
    pg.barrier();
  } catch (const Error& e) {
    unusable = std::string(e.what()).find("unusable") != std::string::npos;
  }
  CHECK(unusable, "after a mismatch the group refuses further collectives");
}

// Rank 0 all-reduces one float while the others all-reduce 65,536 (a rank skipped a collective,
// so its next small one meets the others' large one). MPI must report the truncation before it
// copies: OpenMPI's single-copy path would write the whole message past rank 0's 4-byte buffer
// first (AddressSanitizer sees it; dist/mpi/mpi_transport.cpp turns that path off, also for
// jobs started with plain mpirun, as these are). The default OnError::Abort ends the job.
void mismatch_large(dist::ProcessGroup& pg) {
  Tensor t = full({pg.rank() == 0 ? 1 : 65536}, 1.0);
  pg.all_reduce(t, {.algorithm = dist::Algorithm::Backend});
  std::printf("[rank %d] the mismatched all_reduce returned\n", pg.rank());
  std::fflush(stdout);
  std::exit(1);
}

// Rank 0 waits in an all_reduce that rank 1 joins too late.
void timeout(dist::ProcessGroup& pg) {
  Tensor t = full({4}, 1.0);
  if (pg.rank() == 0) {
    auto start = std::chrono::steady_clock::now();
    try {
      pg.all_reduce(t);
      std::printf("[rank 0] all_reduce returned without timing out\n");
    } catch (const Error& e) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("[rank 0] TIMEOUT-OK after %.1f s: %s\n", s, e.what());
      CHECK(s >= pg.timeout_seconds() * 0.9 && s < pg.timeout_seconds() + 5, "timed out after ", s, " s");
    }
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // never joins in time
  }
  std::fflush(stdout);
}

// Every rank runs collectives; rank 1 dies at step 3 in the given way while the others go on
// into the next collective and wait for it.
void die(dist::ProcessGroup& pg, const std::string& how) {
  for (int step = 0; step < 6; ++step) {
    if (pg.rank() == 1 && step == 3) {
      std::printf("[rank 1] dying by %s\n", how.c_str());
      std::fflush(stdout);
      if (how == "sigkill") raise(SIGKILL);
      if (how == "sigterm") raise(SIGTERM);
      if (how == "abort") std::abort();
      if (how == "exit0") std::exit(0);
      if (how == "exit1") std::exit(1);
    }
    Tensor t = full({1000}, 1.0);
    pg.all_reduce(t);
  }
  std::printf("[rank %d] finished all steps (should not happen for the surviving ranks)\n", pg.rank());
}

// No launcher: a world of one where every collective is an identity and MPI is never loaded.
void single_process() {
  auto info = dist::detect_launch();
  CHECK(!info.multi_process() && info.world_size == 1, "no launcher environment: ", enum_name(info.launcher));
  auto& pg = dist::init();
  CHECK(pg.size() == 1 && pg.rank() == 0 && pg.backend() == "self", "world of one, got ", pg.backend());
  Tensor t = make({1, 2, 3}, DType::F32);
  pg.all_reduce(t, {.op = ReduceOp::Avg});
  pg.all_reduce(t, {.op = ReduceOp::Sum, .algorithm = dist::Algorithm::Ring});
  pg.broadcast(t, {.root = 0, .algorithm = dist::Algorithm::Tree});
  expect_equal(values(t), {1, 2, 3}, "identities");
  expect_equal(values(pg.all_gather(t)), {1, 2, 3}, "all_gather of one");
  auto w = pg.all_reduce_async(t);
  w->wait();
  CHECK(w->is_completed(), "async work completes");
  bool threw = false;
  try {
    pg.send(t, 1);
  } catch (const Error& e) {
    threw = std::string(e.what()).find("send") != std::string::npos;
  }
  CHECK(threw, "send to a rank that does not exist throws");
  // Is libmpi loaded into this process? It must not be.
  FILE* maps = std::fopen("/proc/self/maps", "r");
  char line[4096];
  bool mpi_loaded = false;
  while (maps && std::fgets(line, sizeof(line), maps))
    if (std::strstr(line, "libmpi")) mpi_loaded = true;
  if (maps) std::fclose(maps);
  CHECK(!mpi_loaded, "libmpi is not mapped into a single process");
  dist::finalize();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dist_worker SCENARIO [ARG] [--token=...]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const std::string arg = argc > 2 && std::strncmp(argv[2], "--token", 7) != 0 ? argv[2] : "";
  try {
    if (scenario == "single") {
      single_process();
    } else if (scenario == "launcher_without_mpi") {
      // A launcher's environment but no loadable MPI: init explains what to install.
      try {
        dist::init();
        CHECK(false, "init succeeded without MPI");
      } catch (const Error& e) {
        std::printf("init error: %s\n", e.what());
        CHECK(std::string(e.what()).find("could not be loaded") != std::string::npos, e.what());
      }
    } else {
      dist::InitOptions o;
      if (scenario == "mismatch" || scenario == "timeout") o.on_error = dist::OnError::Throw;
      auto& pg = dist::init(o);
      g_rank = pg.rank();
      if (scenario == "collectives") {
        every_collective(pg);
      } else if (scenario == "accelerate") {
        accelerate_table(pg);
      } else if (scenario == "uneven") {
        uneven_all_gather(pg);
      } else if (scenario == "async") {
        async_overlap(pg);
      } else if (scenario == "late_peer") {
        late_peer(pg);
      } else if (scenario == "algorithms") {
        algorithms(pg);
      } else if (scenario == "mismatch") {
        debug_mismatch(pg);
      } else if (scenario == "mismatch_large") {
        mismatch_large(pg);
      } else if (scenario == "mismatch_abort") {
        Tensor t = full({4}, 1.0);
        if (pg.rank() == 0) {
          pg.all_reduce(t);
        } else {
          pg.all_reduce(full({5}, 1.0));
        }
        std::printf("[rank %d] mismatch went unnoticed\n", pg.rank());
      } else if (scenario == "timeout" || scenario == "timeout_abort") {
        timeout(pg);
      } else if (scenario == "die") {
        die(pg, arg);
      } else if (scenario == "facts") {
        // `facts [LAUNCHER]`: the launcher brisk should see (default openmpi; `slurm` under srun).
        auto info = dist::detect_launch();
        const std::string launcher = arg.empty() ? "openmpi" : arg;
        CHECK(enum_name(info.launcher) == launcher, "launcher ", enum_name(info.launcher), ", expected ", launcher);
        if (launcher == "slurm") {
          // Slurm's own variables, as srun sets them for this task.
          auto env_int = [](const char* name) {
            const char* v = std::getenv(name);
            return v ? std::atoi(v) : -1;
          };
          CHECK(pg.rank() == env_int("SLURM_PROCID") && pg.size() == env_int("SLURM_NTASKS"), "SLURM_PROCID ",
                env_int("SLURM_PROCID"), " SLURM_NTASKS ", env_int("SLURM_NTASKS"));
          CHECK(pg.local_rank() == env_int("SLURM_LOCALID"), "SLURM_LOCALID ", env_int("SLURM_LOCALID"));
        }
        CHECK(pg.rank() == info.rank && pg.size() == info.world_size, "MPI and the environment agree");
        CHECK(pg.local_rank() == info.local_rank && pg.local_size() == info.local_world_size, "local facts");
        std::printf("[rank %d] of %d, local %d of %d, backend %s, host %s\n", pg.rank(), pg.size(), pg.local_rank(),
                    pg.local_size(), pg.backend().c_str(), [] {
                      static char h[256];
                      gethostname(h, sizeof(h));
                      return h;
                    }());
        Tensor t = full({3}, 1.0);
        pg.all_reduce(t);
        CHECK(values(t)[0] == pg.size(), "all_reduce across hosts");
        Tensor r = full({3}, static_cast<double>(pg.rank() + 1));  // 1 + 2 + ... + size
        pg.all_reduce(r);
        CHECK(values(r)[2] == pg.size() * (pg.size() + 1) / 2,  // NOLINT(bugprone-integer-division): exact
              "all_reduce of the ranks gave ", values(r)[2]);
      } else {
        std::fprintf(stderr, "dist_worker: unknown scenario '%s'\n", scenario.c_str());
        return 2;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uncaught: %s\n", g_rank, e.what());
    return 3;
  }
  if (g_failures == 0) std::printf("[rank %d] %s: all checks passed\n", g_rank, scenario.c_str());
  std::fflush(stdout);
  return g_failures == 0 ? 0 : 1;
}
