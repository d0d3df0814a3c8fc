// brisk-selftest's per-rank checks. The cross-rank facts (distinct ranks, forwarded variables,
// exit-status propagation) are compared by `brisk test` from every rank's report.
#include "selftest_checks.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "brisk/accelerate/accelerator.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/autograd/autograd.h"
#include "brisk/dist/dist.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/reduce.h"
#include "brisk/nn/layers.h"
#include "brisk/optim/sgd.h"
#include "brisk/util/env.h"

namespace brisk::selftest {

namespace {

const char* get(const char* name) {
  return std::getenv(name);
}

bool read_int(const char* name, int& out) {
  const char* v = get(name);
  if (!v || !*v) return false;
  const std::optional<int> x = parse_integer<int>(v);
  if (!x || *x < 0 || *x > 1 << 24) return false;
  out = *x;
  return true;
}

CheckResult launcher_variables(const RankInfo& r) {
  if (!r.problem.empty()) return {Status::Fail, r.problem};
  if (!r.launcher_vars) return {Status::Pass, "one process, started directly (no mpirun)"};
  return {Status::Pass, "rank " + std::to_string(r.rank) + " of " + std::to_string(r.size) + ", local " +
                            std::to_string(r.local_rank) + " of " + std::to_string(r.local_size)};
}

CheckResult brisk_settings(const RankInfo&) {
  const char* launched = get(accelerate::env::kLaunched);
  if (!launched || std::string(launched) != "1")
    return {Status::Fail, std::string(accelerate::env::kLaunched) + " is not 1: not started by `brisk launch`?"};
  if (const char* mp = get(accelerate::env::kMixedPrecision); mp && !accelerate::is_valid_mixed_precision(mp))
    return {Status::Fail, std::string(accelerate::env::kMixedPrecision) + "='" + mp + "' is not no, fp16 or bf16"};
  int threads = 0;
  if (!read_int("OMP_NUM_THREADS", threads) || threads < 1)
    return {Status::Fail, "OMP_NUM_THREADS is not a positive number"};
  const char* mp = get(accelerate::env::kMixedPrecision);
  return {Status::Pass,
          std::string("mixed_precision ") + (mp ? mp : "(unset)") + ", OMP_NUM_THREADS " + std::to_string(threads)};
}

// The library loads and computes in every process: sum(1..100) in f32, and the same on a
// strided view (every other element: 1 + 3 + ... + 99 = 2500).
CheckResult tensor_math(const RankInfo&) {
  Tensor x = arange(1, 101, 1, {.dtype = DType::F32});
  float total = kernels::sum(x, {0}).item<float>();
  Tensor odd = x.as_strided({50}, {2}, 0);
  float odd_total = kernels::sum(odd, {0}).item<float>();
  if (total != 5050.0f || odd_total != 2500.0f)
    return {Status::Fail, "sum(1..100) = " + std::to_string(total) +
                              " (expected 5050), odd = " + std::to_string(odd_total) + " (expected 2500)"};
  return {Status::Pass, "sum(1..100) = 5050, strided sum = 2500"};
}

// --- collectives -------------------------------------------------------------------------
// Every rank runs the same calls in the same order; each check compares its own results with
// values computed from the formula. Rank r's input is Accelerate's: arange(n) + 1 + n*r.

constexpr int64_t kN = 4;

dist::ProcessGroup& group() {
  return dist::init({.timeout_seconds = 120.0, .on_error = dist::OnError::Throw});
}

Tensor rank_input(int rank, DType dt) {
  return kernels::cast(arange(1.0 + kN * rank, 1.0 + kN * (rank + 1), 1.0, {.dtype = DType::F64}), dt);
}

std::string show(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(static_cast<long long>(v[i]));
  return s + "]";
}

// Throws with what differed.
void expect_values(const std::string& what, const Tensor& t, const std::vector<double>& want) {
  std::vector<double> got = t.to_vector<double>();
  if (got != want) throw std::runtime_error(what + ": got " + show(got) + ", expected " + show(want));
}

CheckResult all_reduce_check(const RankInfo&) {
  auto& pg = group();
  const int N = pg.size(), r = pg.rank();
  int cases = 0;
  const DType dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8};
  for (DType dt : dtypes) {
    if (dt == DType::U8 && N > 8) continue;  // sums would not fit in a byte
    for (dist::Algorithm algo : {dist::Algorithm::Backend, dist::Algorithm::Ring, dist::Algorithm::Rhd}) {
      for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max, dist::ReduceOp::Min}) {
        if (op == dist::ReduceOp::Avg && !is_floating(dt)) continue;
        Tensor t = rank_input(r, dt);
        pg.all_reduce(t, {.op = op, .algorithm = algo});
        std::vector<double> want(kN);
        for (int64_t i = 0; i < kN; ++i) {
          double sum = N * (i + 1.0) + kN * N * (N - 1) / 2.0;
          want[i] = op == dist::ReduceOp::Sum   ? sum
                    : op == dist::ReduceOp::Avg ? sum / N
                    : op == dist::ReduceOp::Max ? i + 1.0 + kN * (N - 1)
                                                : i + 1.0;
        }
        if (op == dist::ReduceOp::Avg && dt != DType::F32) {  // 16-bit averages round: compare after rounding
          want = kernels::cast(from_vector<double>(want, {kN}), dt).to_vector<double>();
        }
        expect_values(std::string("all_reduce ") + dist::reduce_op_name(op) + " " + dtype_name(dt) + " " +
                          dist::algorithm_name(algo),
                      t, want);
        ++cases;
      }
    }
    // prod on values 1 or 2: the product is 2^(number of ranks with a 2 at that position)
    Tensor t = kernels::cast(from_vector<double>({1.0 + (r % 2), 1.0, 2.0, 1.0}, {4}), dt);
    pg.all_reduce(t, {.op = dist::ReduceOp::Prod});
    expect_values(std::string("all_reduce prod ") + dtype_name(dt), t, {std::pow(2.0, N / 2), 1, std::pow(2.0, N), 1});
    ++cases;
  }
  return {Status::Pass, std::to_string(cases) + " cases: sum/avg/max/min/prod x 6 dtypes x mpi/ring/rhd"};
}

CheckResult broadcast_reduce_check(const RankInfo&) {
  auto& pg = group();
  const int N = pg.size(), r = pg.rank();
  for (dist::Algorithm algo : {dist::Algorithm::Backend, dist::Algorithm::Tree}) {
    Tensor t = rank_input(r, DType::F32);
    pg.broadcast(t, {.root = 0, .algorithm = algo});
    expect_values(std::string("broadcast from 0 ") + dist::algorithm_name(algo), t, {1, 2, 3, 4});
  }
  Tensor t = rank_input(r, DType::I64);
  pg.broadcast(t, {.root = N - 1});
  expect_values("broadcast from the last rank", t,
                {1.0 + kN * (N - 1), 2.0 + kN * (N - 1), 3.0 + kN * (N - 1), 4.0 + kN * (N - 1)});
  Tensor red = rank_input(r, DType::F32);
  pg.reduce(red, {.root = 0, .op = dist::ReduceOp::Sum});
  if (r == 0) {
    std::vector<double> want(kN);
    for (int64_t i = 0; i < kN; ++i) want[i] = N * (i + 1.0) + kN * N * (N - 1) / 2.0;
    expect_values("reduce sum to rank 0", red, want);
  }
  return {Status::Pass, "broadcast (mpi, tree, from rank 0 and the last), reduce"};
}

CheckResult gather_scatter_check(const RankInfo&) {
  auto& pg = group();
  const int N = pg.size(), r = pg.rank();
  std::vector<double> everything(static_cast<size_t>(kN * N));
  for (size_t i = 0; i < everything.size(); ++i) everything[i] = static_cast<double>(i + 1);
  expect_values("all_gather", pg.all_gather(rank_input(r, DType::F32)), everything);  // 1..n*N
  // Uneven: rank r contributes r+1 copies of r.
  Tensor mine = full({r + 1}, static_cast<double>(r), {.dtype = DType::I32});
  std::vector<Tensor> parts = pg.all_gather_uneven(mine);
  for (int q = 0; q < N; ++q)
    expect_values("all_gather_uneven part " + std::to_string(q), parts[q], std::vector<double>(q + 1, q));
  Tensor gathered = r == 0 ? empty({kN * N}, DType::F32) : Tensor();
  pg.gather(gathered, rank_input(r, DType::F32), 0);
  if (r == 0) expect_values("gather to rank 0", gathered, everything);
  Tensor piece = empty({kN}, DType::F32);
  Tensor all = r == 0 ? arange(1.0, 1.0 + kN * N, 1.0, {.dtype = DType::F32}) : Tensor();
  pg.scatter(piece, all, 0);
  expect_values("scatter from rank 0", piece, rank_input(r, DType::F64).to_vector<double>());
  Tensor rs = empty({kN}, DType::F32);
  Tensor in = kernels::cast(arange(0.0, static_cast<double>(kN * N), 1.0, {.dtype = DType::F64}), DType::F32);
  pg.reduce_scatter(rs, in, dist::ReduceOp::Sum);  // every rank sends the same: block r summed N times
  std::vector<double> want(kN);
  for (int64_t i = 0; i < kN; ++i) want[i] = N * static_cast<double>(kN * r + i);
  expect_values("reduce_scatter", rs, want);
  Tensor a2a_in = empty({N}, DType::I64), a2a_out = empty({N}, DType::I64);
  for (int q = 0; q < N; ++q) a2a_in.data<int64_t>()[q] = 100 * r + q;  // block q goes to rank q
  pg.all_to_all(a2a_out, a2a_in);
  std::vector<double> from(N);
  for (int q = 0; q < N; ++q) from[q] = 100.0 * q + r;
  expect_values("all_to_all", a2a_out, from);
  return {Status::Pass, "all_gather (equal, uneven), gather, scatter, reduce_scatter, all_to_all"};
}

CheckResult p2p_barrier_check(const RankInfo&) {
  auto& pg = group();
  const int N = pg.size(), r = pg.rank();
  pg.barrier();
  if (N == 1) return {Status::Pass, "barrier (one process: no peers for send/recv)"};
  // A ring: each rank sends its rank to the next and receives from the previous.
  Tensor out = full({3}, static_cast<double>(r), {.dtype = DType::F32}), in = empty({3}, DType::F32);
  auto w = pg.send_async(out, (r + 1) % N);
  pg.recv(in, (r + N - 1) % N);
  w->wait();
  expect_values("recv from the previous rank", in, std::vector<double>(3, (r + N - 1) % N));
  // Two async collectives outstanding at once complete in order.
  Tensor a = rank_input(r, DType::F32), b = rank_input(r, DType::F32);
  auto wa = pg.all_reduce_async(a), wb = pg.all_reduce_async(b);
  wb->wait();
  if (!wa->is_completed()) throw std::runtime_error("async all_reduce #1 finished before #0");
  pg.barrier();
  return {Status::Pass, "barrier, send/recv around a ring, two async all_reduces in order"};
}

std::vector<float> flat(const nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m.parameters()) {
    auto v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Every rank trains a small linear model a few SGD steps with the Accelerator (batch 8 per
// process); then every rank must hold the same parameters, bit for bit, and they must equal one
// process trained on the same data with the global batch (8 x processes).
CheckResult data_parallel_step(const RankInfo&) {
  Accelerator acc({.cpu = true, .seed = 0});
  const int64_t N = acc.num_processes(), b = 8, steps = 3;
  Generator g(7);
  Tensor x = randn({N * b * steps, 6}, {}, &g);
  Tensor y = randn({N * b * steps, 2}, {}, &g);
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  nn::Linear net(6, 2);
  optim::SGD opt(net.parameters(), {.lr = 0.1});
  data::DataLoader loader(ds, {.batch_size = b});
  acc.prepare(net, opt, loader);
  for (auto& [xb, yb] : loader) {
    acc.backward(mse_loss(net(xb), yb));
    opt.step();
    opt.zero_grad();
  }
  const std::vector<float> mine = flat(net);
  Tensor all = acc.gather(from_vector<float>(mine, {1, static_cast<int64_t>(mine.size())}));
  std::vector<float> every = all.to_vector<float>();
  for (int64_t r = 1; r < N; ++r)
    if (std::memcmp(every.data(), every.data() + r * mine.size(), mine.size() * sizeof(float)) != 0)
      return {Status::Fail, "rank " + std::to_string(r) + "'s parameters differ from rank 0's after " +
                                std::to_string(steps) + " steps"};
  manual_seed(0);
  nn::Linear ref(6, 2);
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.1});
  data::DataLoader ref_loader(ds, {.batch_size = N * b});
  for (auto& [xb, yb] : ref_loader) {
    mse_loss(ref(xb), yb).backward();
    ref_opt.step();
    ref_opt.zero_grad();
  }
  const std::vector<float> want = flat(ref);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(mine[i]) - want[i]) / (1e-5 + std::fabs(want[i])));
  if (worst > 1e-5)
    return {Status::Fail, "parameters differ from one process with batch " + std::to_string(N * b) +
                              " (worst relative difference " + std::to_string(worst) + ")"};
  return {Status::Pass, std::to_string(steps) + " SGD steps on " + std::to_string(N) +
                            " process(es): parameters identical on every rank and equal to 1 process with batch " +
                            std::to_string(N * b)};
}

}  // namespace

RankInfo read_rank_info() {
  RankInfo r;
  bool any = get("OMPI_COMM_WORLD_RANK") || get("OMPI_COMM_WORLD_SIZE");
  if (!any) return r;
  r.launcher_vars = true;
  if (!read_int("OMPI_COMM_WORLD_RANK", r.rank) || !read_int("OMPI_COMM_WORLD_SIZE", r.size) ||
      !read_int("OMPI_COMM_WORLD_LOCAL_RANK", r.local_rank) || !read_int("OMPI_COMM_WORLD_LOCAL_SIZE", r.local_size)) {
    r.problem = "OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE} missing or not numbers";
  } else if (r.size < 1 || r.rank >= r.size || r.local_size < 1 || r.local_rank >= r.local_size ||
             r.local_size > r.size) {
    r.problem = "inconsistent: rank " + std::to_string(r.rank) + " of " + std::to_string(r.size) + ", local " +
                std::to_string(r.local_rank) + " of " + std::to_string(r.local_size);
  }
  return r;
}

std::vector<SelfCheck> self_checks() {
  return {
      {"launcher variables", launcher_variables},
      {"BRISK_* settings", brisk_settings},
      {"tensor math", tensor_math},
      // The dist library's collectives, each against values computed from the inputs' formula.
      {"all_reduce", all_reduce_check},
      {"broadcast, reduce", broadcast_reduce_check},
      {"gather, scatter, all_to_all", gather_scatter_check},
      {"send/recv, barrier, async", p2p_barrier_check},
      {"data-parallel training step", data_parallel_step},
  };
}

}  // namespace brisk::selftest
