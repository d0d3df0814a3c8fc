// accelerator_worker: the Accelerator's multi-process scenarios (run under mpirun by
// tests/accelerate/accelerator_tests.cmake, or as one process), mirroring Accelerate's own test
// scripts: sharding, gather_for_metrics, accumulation, data-parallel equivalence, and training
// runs that save and resume checkpoints (compared by run_resume.sh).
#include <brisk/brisk.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "expect_or_die.h"
#include "tiny_net.h"

using namespace brisk;
using namespace brisk::testing;

namespace {

std::string show(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str() + "]";
}

std::shared_ptr<data::TensorDataset> index_data(int64_t n) {
  return std::make_shared<data::TensorDataset>(arange(n), arange(n));
}

// The gathered sample indices of one epoch of `loader` (gather, or gather_for_metrics).
std::vector<int64_t> epoch_indices(Accelerator& acc, data::DataLoader& loader, bool for_metrics) {
  std::vector<int64_t> all;
  for (auto& b : loader) {
    Tensor g = for_metrics ? acc.gather_for_metrics(b.data) : acc.gather(b.data);
    auto v = g.to_vector<int64_t>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Over an epoch the gathered indices of DataLoader(range(32 N), batch 8) are arange(32 N)
// (sorted when shuffled), with and without split_batches; the even_batches example; and
// gather_for_metrics gives exactly len(dataset) for sizes that do not divide evenly.
void sharding() {
  const int64_t N = dist::world().size();
  for (bool split : {false, true})
    for (bool shuffle : {false, true}) {
      Accelerator acc({.split_batches = split});
      data::DataLoader loader(index_data(32 * N), {.batch_size = 8, .shuffle = shuffle, .seed = 3});
      acc.prepare(loader);
      EXPECT_OR_DIE(loader.size() == (split ? 4 * N : 4), "batches per rank " << loader.size());
      for (int epoch = 0; epoch < 2; ++epoch) {
        std::vector<int64_t> got = epoch_indices(acc, loader, false);
        if (shuffle) std::sort(got.begin(), got.end());
        EXPECT_OR_DIE(got == iota(32 * N), "split " << split << " shuffle " << shuffle << ": " << show(got));
      }
    }
  if (N == 2) {
    Accelerator acc;
    data::DataLoader loader(index_data(22), {.batch_size = 3});
    acc.prepare(loader);
    std::vector<int64_t> last;
    for (auto& b : loader) last = b.data.to_vector<int64_t>();
    const std::vector<int64_t> want =
        acc.process_index() == 1 ? std::vector<int64_t>{21, 0, 1} : std::vector<int64_t>{18, 19, 20};
    EXPECT_OR_DIE(last == want, "last batch " << show(last));
  }
  for (int64_t size : {22, 37, 5, 1, 64})
    for (int64_t batch : {3, 4})
      for (bool split : {false, true})
        for (bool shuffle : {false, true}) {
          if (split && batch % N != 0) continue;
          Accelerator acc({.split_batches = split});
          data::DataLoader loader(index_data(size), {.batch_size = batch, .shuffle = shuffle, .seed = 11});
          acc.prepare(loader);
          for (int epoch = 0; epoch < 2; ++epoch) {
            std::vector<int64_t> got = epoch_indices(acc, loader, true);
            std::sort(got.begin(), got.end());
            EXPECT_OR_DIE(got == iota(size), "size " << size << " batch " << batch << " split " << split << " shuffle "
                                                     << shuffle << ": " << show(got));
          }
        }
  // An IterableDataset is sharded too (rounds of batch × N, the last padded from the first).
  struct Stream : data::IterableDataset {
    int64_t n, i = 0;
    explicit Stream(int64_t n) : n(n) {}
    std::optional<data::Example> next() override {
      if (i >= n) return std::nullopt;
      Tensor v = full({}, static_cast<double>(i++), {.dtype = DType::I64});
      return data::Example{v, v};
    }
    void reset(uint64_t) override { i = 0; }
  };
  for (int64_t size : {22, 24, 3})
    for (bool split : {false, true}) {
      Accelerator acc({.split_batches = split});
      data::DataLoader loader(std::make_shared<Stream>(size), {.batch_size = split ? 4 : 3});
      acc.prepare(loader);
      for (int epoch = 0; epoch < 2; ++epoch) {
        std::vector<int64_t> got = epoch_indices(acc, loader, true);
        EXPECT_OR_DIE(got == iota(size), "stream of " << size << " split " << split << ": " << show(got));
      }
    }
  // A loader whose DistributedSampler already splits the samples is left as it is.
  {
    Accelerator acc;
    auto sampler = std::make_shared<data::DistributedSampler>(20, N, acc.process_index(), false);
    data::DataLoader loader(index_data(20), {.batch_size = 2, .sampler = sampler});
    acc.prepare(loader);
    std::vector<int64_t> mine;
    for (auto& b : loader)
      for (int64_t i : b.data.to_vector<int64_t>()) mine.push_back(i);
    EXPECT_OR_DIE(mine == sampler->indices(0), "DistributedSampler loader: " << show(mine));
  }
}

// gradient_accumulation_steps = 2: gradients differ across ranks inside no_sync micro-steps and
// agree at sync steps and at the last batch; the result equals training with the doubled batch.
void accumulate() {
  const int64_t N = dist::world().size(), b = 4;
  for (int64_t micro : {6, 5}) {
    Accelerator acc({.gradient_accumulation_steps = 2, .seed = 1});
    TinyNet net;
    optim::SGD opt(net.parameters(), {.lr = 0.2});
    auto ds = tiny_data(N * b * micro);
    data::DataLoader loader(ds, {.batch_size = b});
    acc.prepare(net, opt, loader);
    std::vector<bool> syncs;
    for (auto& [x, y] : loader) {
      auto s = acc.accumulate(net);
      acc.backward(cross_entropy(net(x), y));
      const bool same = same_on_every_rank(acc, flat_grads(net));
      EXPECT_OR_DIE(same == (s.sync() || N == 1), "micro-step " << syncs.size() << ": sync " << s.sync()
                                                                << " but grads " << (same ? "agree" : "differ"));
      syncs.push_back(s.sync());
      opt.step();
      opt.zero_grad();
    }
    const std::vector<bool> want = micro == 6 ? std::vector<bool>{false, true, false, true, false, true}
                                              : std::vector<bool>{false, true, false, true, true};
    EXPECT_OR_DIE(syncs == want, "sync pattern for " << micro << " micro-steps");
    EXPECT_OR_DIE(same_on_every_rank(acc, flat_params(net)), "parameters differ across ranks");
    if (micro != 6) continue;
    // One process, batch 2 N b: the same samples per optimizer step.
    manual_seed(1);
    TinyNet ref;
    optim::SGD ref_opt(ref.parameters(), {.lr = 0.2});
    data::DataLoader ref_loader(ds, {.batch_size = 2 * N * b});
    for (auto& [x, y] : ref_loader) {
      cross_entropy(ref(x), y).backward();
      ref_opt.step();
      ref_opt.zero_grad();
    }
    auto a = flat_params(net), r = flat_params(ref);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_OR_DIE(std::fabs(a[i] - r[i]) <= 1e-5 + 1e-5 * std::fabs(r[i]),
                    "param " << i << ": " << a[i] << " vs " << r[i]);
  }
}

// N processes with batch b match one process with batch N b (SGD: fp32 tolerances; Adam 1e-5),
// and every rank holds bit-identical parameters after every step.
void equivalence() {
  const int64_t N = dist::world().size(), b = 4, steps = 12;
  for (bool adam : {false, true}) {
    Accelerator acc({.seed = 5});
    TinyNet net;
    std::unique_ptr<optim::Optimizer> opt;
    if (adam)
      opt = std::make_unique<optim::Adam>(net.parameters(), optim::AdamOptions{.lr = 0.01});
    else
      opt = std::make_unique<optim::SGD>(net.parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    auto ds = tiny_data(N * b * steps, 9);
    data::DataLoader loader(ds, {.batch_size = b});
    acc.prepare(net, *opt, loader);
    for (auto& [x, y] : loader) {
      acc.backward(cross_entropy(net(x), y));
      opt->step();
      opt->zero_grad();
      EXPECT_OR_DIE(same_on_every_rank(acc, flat_params(net)), "parameters differ across ranks");
    }
    manual_seed(5);
    TinyNet ref;
    std::unique_ptr<optim::Optimizer> ref_opt;
    if (adam)
      ref_opt = std::make_unique<optim::Adam>(ref.parameters(), optim::AdamOptions{.lr = 0.01});
    else
      ref_opt = std::make_unique<optim::SGD>(ref.parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    data::DataLoader ref_loader(ds, {.batch_size = N * b});
    for (auto& [x, y] : ref_loader) {
      cross_entropy(ref(x), y).backward();
      ref_opt->step();
      ref_opt->zero_grad();
    }
    const double rtol = adam ? 1e-5 : 1.3e-6, atol = 1e-5;
    auto a = flat_params(net), r = flat_params(ref);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_OR_DIE(std::fabs(a[i] - r[i]) <= atol + rtol * std::fabs(r[i]),
                    (adam ? "Adam" : "SGD") << " param " << i << ": " << a[i] << " vs " << r[i]);
  }
}

// gather, reduce, broadcast, pad_across_processes, split_between_processes, main_process_first
// and the no_sync guard, against values computed by hand.
void collectives() {
  Accelerator acc;
  const int64_t N = acc.num_processes(), r = acc.process_index();
  Tensor g = acc.gather(full({2, 3}, static_cast<double>(r), {.dtype = DType::F32}));
  EXPECT_OR_DIE(g.sizes() == (Shape{2 * N, 3}), "gather shape");
  auto gv = g.to_vector<float>();
  for (int64_t i = 0; i < 2 * N * 3; ++i) {
    const int64_t row = i / 6;
    EXPECT_OR_DIE(gv[static_cast<size_t>(i)] == static_cast<float>(row), i);
  }
  if (N > 1) {
    std::string e;
    try {
      acc.gather(full({r + 1}, 1.0));
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_OR_DIE(e.find("rank 0 f32 [1], rank 1 f32 [2]") != std::string::npos, "gather mismatch error: " << e);
  }
  Tensor one = full({1}, static_cast<double>(r + 1), {.dtype = DType::F32});
  const int64_t rank_sum = N * (N + 1) / 2;
  EXPECT_OR_DIE(acc.reduce(one).item<float>() == static_cast<float>(rank_sum), "sum");
  EXPECT_OR_DIE(acc.reduce(one, dist::ReduceOp::Mean).item<float>() == static_cast<float>(N + 1) / 2, "mean");
  EXPECT_OR_DIE(acc.reduce(one, dist::ReduceOp::Max).item<float>() == static_cast<float>(N), "max");
  EXPECT_OR_DIE(acc.reduce(one, dist::ReduceOp::Min).item<float>() == 1.0f, "min");
  float factorial = 1.0f;
  for (int64_t k = 2; k <= N; ++k) factorial *= static_cast<float>(k);
  EXPECT_OR_DIE(acc.reduce(one, dist::ReduceOp::Product).item<float>() == factorial, "product");
  EXPECT_OR_DIE(one.item<float>() == static_cast<float>(r + 1), "reduce must not change its input");
  EXPECT_OR_DIE(acc.broadcast(one, static_cast<int>(N - 1)).item<float>() == static_cast<float>(N), "broadcast");
  // The world-of-one unit test's cases with N ranks: whole tensors, integer dtypes, 0-d inputs.
  Tensor block = mul(arange(6).reshape({2, 3}), full({}, static_cast<double>(r + 1), {.dtype = DType::I64}));
  EXPECT_OR_DIE(block.dtype() == DType::I64, "block dtype");
  auto bsum = acc.reduce(block).to_vector<int64_t>(),
       bmax = acc.reduce(block, dist::ReduceOp::Max).to_vector<int64_t>();
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_OR_DIE(bsum[static_cast<size_t>(i)] == i * N * (N + 1) / 2, "i64 sum element " << i);
    EXPECT_OR_DIE(bmax[static_cast<size_t>(i)] == i * N, "i64 max element " << i);
  }
  EXPECT_OR_DIE(acc.reduce(block).sizes() == (Shape{2, 3}), "reduce keeps the shape");
  std::string mean_error;
  try {
    acc.reduce(block, dist::ReduceOp::Mean);
  } catch (const Error& err) {
    mean_error = err.what();
  }
  EXPECT_OR_DIE(!mean_error.empty(), "the mean of an integer tensor was accepted");
  Tensor scalars = acc.gather(full({}, static_cast<double>(10 * r), {.dtype = DType::I64}));
  EXPECT_OR_DIE(scalars.sizes() == (Shape{N}), "gather of 0-d tensors: [N]");
  for (int64_t i = 0; i < N; ++i) EXPECT_OR_DIE(scalars.to_vector<int64_t>()[static_cast<size_t>(i)] == 10 * i, i);
  Tensor from0 = acc.broadcast(full({2, 2}, static_cast<double>(7 + r), {.dtype = DType::F64}));
  for (double v : from0.to_vector<double>()) EXPECT_OR_DIE(v == 7.0, "broadcast of a 2x2 block from rank 0: " << v);
  Tensor mine = full({r + 1, 2}, static_cast<double>(r + 1), {.dtype = DType::I64});
  Tensor padded = acc.pad_across_processes(mine, 0, -1);
  EXPECT_OR_DIE(padded.sizes() == (Shape{N, 2}), "pad shape");
  auto pv = padded.to_vector<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    EXPECT_OR_DIE(pv[static_cast<size_t>(2 * i)] == (i <= r ? r + 1 : -1), "pad row " << i);
  auto first = acc.pad_across_processes(mine, 0, -1, true).to_vector<int64_t>();
  EXPECT_OR_DIE(first[static_cast<size_t>(2 * (N - 1))] == r + 1 && (r == N - 1 || first[0] == -1), "pad_first");
  std::vector<int64_t> share = acc.split_between_processes(std::vector<int64_t>{0, 1, 2, 3, 4});
  const std::vector<std::vector<int64_t>> want2 = {{0, 1, 2}, {3, 4}}, want4 = {{0, 1}, {2}, {3}, {4}};
  if (N == 2) EXPECT_OR_DIE(share == want2[static_cast<size_t>(r)], "split " << show(share));
  if (N == 4) EXPECT_OR_DIE(share == want4[static_cast<size_t>(r)], "split " << show(share));
  // main_process_first: the main process writes, the others find the file when they enter.
  const std::string marker = "accelerator_worker_marker_np" + std::to_string(N);
  if (acc.is_main_process()) std::filesystem::remove(marker);
  acc.wait_for_everyone();
  {
    auto guard = acc.main_process_first();
    if (acc.is_main_process())
      std::ofstream(marker) << "made by the main process\n";
    else
      EXPECT_OR_DIE(std::filesystem::exists(marker), "the main process did not go first");
  }
  acc.wait_for_everyone();
  if (acc.is_main_process()) std::filesystem::remove(marker);
  // no_sync: inside the guard gradients stay local; outside they are averaged.
  manual_seed(3);
  TinyNet net;
  acc.prepare(net);
  auto ds = tiny_data(4 * N, 17);
  Tensor x = ds->data().narrow(0, 4 * r, 4), y = ds->targets().narrow(0, 4 * r, 4);
  {
    auto ns = acc.no_sync(net);
    acc.backward(cross_entropy(net(x), y));
  }
  EXPECT_OR_DIE(same_on_every_rank(acc, flat_grads(net)) == (N == 1), "no_sync gradients");
  acc.backward(cross_entropy(net(x), y));
  EXPECT_OR_DIE(same_on_every_rank(acc, flat_grads(net)), "synced gradients differ");
}

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string tensor_sha(const nn::NamedTensors& tensors) {
  std::string bytes;
  for (auto& [name, t] : tensors) {
    Tensor c = t.is_contiguous() ? t : t.contiguous();
    bytes += name;
    bytes.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return accelerate::sha256_hex(bytes);
}

// A training run with Adam, a StepLR schedule, dropout, shuffling and gradient accumulation,
// saving (and resuming) with save_state / load_state. Writes each step's loss in hex to
// losses_rank<r>_<tag>.txt and, when it reaches --steps, the final state to final_rank<r>.txt.
int train(int64_t steps, int64_t save_at, int64_t stop_at, bool resume, const std::string& out, const std::string& tag,
          int64_t gas, const std::string& load) {
  Accelerator acc({.gradient_accumulation_steps = gas,
                   .seed = 7,
                   .project_dir = out,
                   .automatic_checkpoint_naming = true,
                   .total_limit = 3});
  TinyNet net(0.2);
  optim::Adam opt(net.parameters(), {.lr = 0.01});
  optim::StepLR sched(opt, 7, 0.9);
  data::DataLoader loader(tiny_data(120), {.batch_size = 4, .shuffle = true, .seed = 5});
  acc.prepare(net, opt, loader, sched);
  int64_t done = 0;
  acc.register_for_checkpointing(
      "done", [&] { return json::Value(done); }, [&](const json::Value& v) { done = v.as_int(); });
  if (resume || !load.empty()) {
    std::string path = acc.load_state(load);
    acc.print("loaded ", path, " at step ", done);
  }
  std::ofstream losses(out + "/losses_rank" + std::to_string(acc.process_index()) + "_" + tag + ".txt",
                       std::ios::trunc);
  while (done < steps) {
    for (auto& [x, y] : loader) {
      auto s = acc.accumulate(net);
      Tensor loss = cross_entropy(net(x), y);
      acc.backward(loss);
      opt.step();
      sched.step();
      opt.zero_grad();
      ++done;
      losses << done << " " << hex(loss.item<double>()) << "\n" << std::flush;
      if (done == save_at) {
        // Inside an accumulation window each rank holds its own, not yet synchronised gradients.
        const bool window = !acc.sync_gradients();
        const std::string path = acc.save_state();
        std::printf("rank %d saved %s%s\n", acc.process_index(), path.c_str(),
                    window ? " inside an accumulation window" : "");
        std::fflush(stdout);
      }
      if (done == stop_at) return 0;
      if (done == steps) break;
    }
  }
  std::ofstream fin(out + "/final_rank" + std::to_string(acc.process_index()) + ".txt", std::ios::trunc);
  optim::StateDict osd = opt.state_dict();
  fin << "params " << tensor_sha(net.state_dict()) << "\n";
  fin << "optimizer_tensors " << tensor_sha(osd.tensors) << "\n";
  for (auto& [k, v] : osd.scalars) fin << "optimizer " << k << " " << hex(v) << "\n";
  for (auto& [k, v] : sched.state_dict().scalars) fin << "scheduler " << k << " " << hex(v) << "\n";
  const Generator::State g = default_generator().state();
  fin << "rng " << g.seed << " " << g.offset << "\n";
  fin << "loader " << loader.epoch() << " " << loader.position() << "\n";
  fin << "accumulate_step " << acc.step() << "\n";
  return 0;
}

// The child of the checkpoint fault tests (test_checkpoint_faults.cpp): resumes from the newest
// complete checkpoint under `out` (or from out/fixed with `fixed`), says "ready <micro-steps>",
// then does one micro-step and a save_state, `saves` times (0: until it is killed). With
// `file_size_limit` > 0 every file it writes after "ready" is capped at that many bytes
// (RLIMIT_FSIZE, a full disk's stand-in); set here rather than before exec because the OpenMP
// runtime writes a registration file of its own when it loads.
int save_loop(const std::string& out, int64_t saves, bool fixed, int64_t file_size_limit) {
  SaveLoopRun run(out);
  auto& [acc, net, opt, loader, done] = run;
  const std::string fixed_dir = out + "/fixed";
  if (fixed ? std::filesystem::exists(fixed_dir) : std::filesystem::exists(out + "/checkpoints"))
    acc.load_state(fixed ? fixed_dir : "");
  if (file_size_limit > 0) {
    const rlim_t limit = static_cast<rlim_t>(file_size_limit);
    const struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) throw std::runtime_error("save_loop: setrlimit(RLIMIT_FSIZE) failed");
    ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead of killing us
  }
  std::printf("ready %lld\n", static_cast<long long>(done));
  std::fflush(stdout);
  for (int64_t s = 0;;)
    for (auto& [x, y] : loader) {
      auto a = acc.accumulate(net);
      acc.backward(cross_entropy(net(x), y));
      opt.step();
      opt.zero_grad();
      ++done;
      acc.save_state(fixed ? fixed_dir : "");
      if (saves > 0 && ++s >= saves) return 0;
    }
}

}  // namespace

int main(int argc, char** argv) {
  cli::Parser p("accelerator_worker", "One rank of an Accelerator test scenario.");
  std::string token, out = "out/accelerator_worker", tag = "run", load;
  int64_t steps = 200, save_at = 0, stop_at = 0, gas = 2, saves = 0, file_size_limit = 0;
  bool resume = false, fixed = false;
  p.add("token", "ignored (lets the test runner find leftover processes)", &token);
  p.add("steps", "train: micro-steps in all", &steps);
  p.add("save_at", "train: save_state after this micro-step (0: never)", &save_at);
  p.add("stop_at", "train: exit after this micro-step (0: run to --steps)", &stop_at);
  p.add("resume", "train: load_state() the newest checkpoint first", &resume);
  p.add("load", "train: load_state(this folder) first", &load);
  p.add("out", "train: project folder", &out);
  p.add("tag", "train: names this run's loss file", &tag);
  p.add("gas", "train: gradient_accumulation_steps", &gas);
  p.add("saves", "save_loop: checkpoints to save (0: until killed)", &saves);
  p.add("fixed", "save_loop: save to <out>/fixed again and again (not checkpoint_<n>)", &fixed);
  p.add("file_size_limit", "save_loop: cap every file written while saving at this many bytes (0: no cap)",
        &file_size_limit);
  p.allow_positionals("SCENARIO");
  if (!p.parse(argc, argv)) return p.exit_code();
  if (p.positionals().size() != 1) {
    std::fprintf(stderr,
                 "usage: accelerator_worker SCENARIO (sharding, accumulate, equivalence, collectives, train, "
                 "save_loop)\n");
    return 2;
  }
  const std::string scenario = p.positionals()[0];
  try {
    rank_for_messages = dist::init().rank();
    if (scenario == "sharding")
      sharding();
    else if (scenario == "accumulate")
      accumulate();
    else if (scenario == "equivalence")
      equivalence();
    else if (scenario == "collectives")
      collectives();
    else if (scenario == "train") {
      std::filesystem::create_directories(out);
      int rc = train(steps, save_at, stop_at, resume, out, tag, gas, load);
      if (rc != 0) return rc;
    } else if (scenario == "save_loop") {
      std::filesystem::create_directories(out);
      int rc = save_loop(out, saves, fixed, file_size_limit);
      if (rc != 0) return rc;
    } else {
      std::fprintf(stderr, "accelerator_worker: unknown scenario '%s'\n", scenario.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL rank %d: %s\n", rank_for_messages, e.what());
    return 1;
  }
  std::printf("PASS %s rank %d of %d\n", scenario.c_str(), dist::world().rank(), dist::world().size());
  return 0;
}
