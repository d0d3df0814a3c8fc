// Data-parallel step time vs the Reducer's bucket size, for the example CNN (models::FashionCNN,
// random data, SGD), run under mpirun:
//
//   OMP_NUM_THREADS=1 mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 ./build/bench/bench_buckets
//
// Configurations: "local" (no communication: the compute floor), "per-param" (one all-reduce
// per parameter: no bucketing), "1 MiB" (every bucket <= 1 MiB), "25 MiB" (the default: first
// bucket 1 MiB, the rest 25 MiB) and "one bucket" (everything in one all-reduce, which can only
// start when the whole backward is done: no overlap). Each configuration has its own Reducer
// on the same model (the others are switched off with set_sync(false)); blocks of steps run
// interleaved, so load from other programs hits them alike; a step's time is the slowest
// rank's, and the table gives the median over all timed steps. With BRISK_TRACE=<file> the
// forward, backward, optimizer step and every bucket's all-reduce are traced (docs/data-parallel.md).
#include <brisk/brisk.h>
#include <brisk/util/cli.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_host.h"

using namespace brisk;
using brisk::bench::cpu_model;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Config {
  std::string key, name;
  bool communicate;
  dist::ReducerOptions options;
  std::unique_ptr<dist::Reducer> reducer;
  std::vector<double> step_ms;
  std::vector<double> exposed_ms;  // per step: the wait in finalize() for the last all-reduce
  std::vector<double> lead_ms;     // per step: how long before the backward's end bucket 0 launched
};

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 64;
  int steps = 2, repeats = 30, warmup = 2;
  std::string config_list = "local,per-param,1mib,25mib,one";
  cli::Parser p("bench_buckets",
                "Data-parallel step time of the example CNN vs the Reducer's bucket size; run it under mpirun.");
  p.add("batch", "images per process per step", &batch);
  p.add("steps", "timed steps per block", &steps);
  p.add("repeats", "blocks per configuration (interleaved)", &repeats);
  p.add("warmup", "untimed steps per configuration first", &warmup);
  p.add("configs", "comma-separated: local, per-param, 1mib, 25mib, one", &config_list);
  if (!p.parse(argc, argv)) return p.exit_code();

  try {
    auto& pg = dist::init();
    const int W = pg.size(), me = pg.rank();
    default_generator().manual_seed(1);
    models::FashionCNN model;
    optim::SGD opt(model.parameters(), {.lr = 0.01, .momentum = 0.9});
    Generator g(100 + static_cast<uint64_t>(me));
    Tensor x = randn({batch, 1, 28, 28}, {}, &g);
    Tensor y = randint(0, 10, {batch}, {.dtype = DType::I64}, &g);

    std::vector<Config> all;
    all.push_back({"local", "local (no communication)", false, {}, nullptr, {}, {}, {}});
    all.push_back({"per-param",
                   "per-param (no bucketing)",
                   true,
                   {.bucket_cap_mb = 0, .first_bucket_mb = 0},
                   nullptr,
                   {},
                   {},
                   {}});
    all.push_back({"1mib", "1 MiB buckets", true, {.bucket_cap_mb = 1, .first_bucket_mb = 1}, nullptr, {}, {}, {}});
    all.push_back({"25mib",
                   "25 MiB (default: first 1 MiB)",
                   true,
                   {.bucket_cap_mb = 25, .first_bucket_mb = 1},
                   nullptr,
                   {},
                   {},
                   {}});
    all.push_back({"one", "one bucket", true, {.bucket_cap_mb = 1e6, .first_bucket_mb = 1e6}, nullptr, {}, {}, {}});
    std::vector<Config> configs;
    for (const std::string& k : cli::split_comma_list(config_list)) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Config& c) { return c.key == k; });
      BRISK_CHECK(it != all.end(), "bench_buckets: unknown configuration '", k,
                  "' (local, per-param, 1mib, 25mib, one)");
      configs.push_back(std::move(*it));
      all.erase(it);
    }
    BRISK_CHECK(!configs.empty(), "bench_buckets: --configs is empty");
    for (Config& c : configs)
      if (c.communicate) {
        c.reducer = std::make_unique<dist::Reducer>(model.named_parameters(), pg, c.options);
        c.reducer->set_sync(false);
      }

    auto run_step = [&](Config& c, bool timed) {
      pg.barrier();
      auto t0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      Tensor loss;
      {
        TraceSpan span("forward", "compute");
        loss = cross_entropy(model.forward(x), y);
      }
      {
        TraceSpan span("backward", "compute");
        loss.backward();
      }
      {
        TraceSpan span("optimizer step", "compute");
        opt.step();
      }
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      Tensor slowest = from_vector<double>({ms}, {1});
      pg.all_reduce(slowest, {.op = dist::ReduceOp::Max});
      if (!timed) return;
      c.step_ms.push_back(slowest.item<double>());
      if (c.reducer) {
        const auto& ev = c.reducer->last_step_events();
        const double end_bw = c.reducer->last_backward_end_us();
        double last = end_bw;
        for (const auto& e : ev) last = std::max(last, e.end_us);
        c.exposed_ms.push_back((last - end_bw) / 1000.0);
        c.lead_ms.push_back(ev.empty() ? 0.0 : (end_bw - ev.front().start_us) / 1000.0);
      }
    };
    auto activate = [&](Config& c) {
      for (Config& o : configs)
        if (o.reducer) o.reducer->set_sync(&o == &c);
    };

    for (Config& c : configs) {
      activate(c);
      for (int i = 0; i < warmup; ++i) run_step(c, false);
    }
    const auto wall0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < repeats; ++rep)
      for (Config& c : configs) {
        activate(c);
        for (int i = 0; i < steps; ++i) run_step(c, true);
      }
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

    if (me == 0) {
      char host[256] = {};
      gethostname(host, sizeof(host));
      std::time_t now = std::time(nullptr);
      char date[64];
      std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M", std::localtime(&now));
      std::printf("# bench_buckets: FashionCNN, %d processes x batch %lld, SGD, f32, backend %s, %s\n", W,
                  static_cast<long long>(batch), pg.backend().c_str(), date);
      std::printf("# host %s: %s, %ld cores; OMP threads per process: %d\n", host, cpu_model().c_str(),
                  sysconf(_SC_NPROCESSORS_ONLN), get_num_threads());
      std::printf(
          "# gradients: %lld f32 = %.2f MiB; step time = slowest rank, median of %d steps (%d interleaved "
          "blocks of %d)\n",
          static_cast<long long>(model.num_parameters()), model.num_parameters() * 4.0 / (1024 * 1024), repeats * steps,
          repeats, steps);
      std::printf(
          "# exposed comm: wait in finalize() after the backward for the last all-reduce; bucket 0 lead: how\n"
          "# long before the backward's end bucket 0 was launched (rank 0, medians)\n");
      std::printf("| %-30s | %7s | %16s | %9s | %10s | %17s | %14s |\n", "configuration", "buckets", "step ms (median)",
                  "vs first", "images/s", "exposed comm (ms)", "bucket 0 lead");
      std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(9, '-').c_str(),
                  std::string(18, '-').c_str(), std::string(11, '-').c_str(), std::string(12, '-').c_str(),
                  std::string(19, '-').c_str(), std::string(16, '-').c_str());
      const double local = median(configs[0].step_ms);  // the first configuration is the baseline
      for (Config& c : configs) {
        const double ms = median(c.step_ms);
        const std::string nb = c.reducer ? std::to_string(c.reducer->buckets().size()) : "-";
        char exposed[32] = "-", lead[32] = "-";
        if (c.reducer) {
          std::snprintf(exposed, sizeof exposed, "%.1f", median(c.exposed_ms));
          std::snprintf(lead, sizeof lead, "%.1f ms", median(c.lead_ms));
        }
        std::printf("| %-30s | %7s | %16.1f | %8.2fx | %10.0f | %17s | %14s |\n", c.name.c_str(), nb.c_str(), ms,
                    ms / local, W * batch * 1000.0 / ms, exposed, lead);
      }
      std::printf("# wall %.0f s\n", wall_s);
    }
    configs.clear();
    dist::finalize();
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_buckets: %s\n", e.what());
    return 1;
  }
  return 0;
}
