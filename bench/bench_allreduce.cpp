// All-reduce bandwidth, nccl-tests style: a size sweep for MPI's all-reduce and each of
// brisk's algorithms (ring, recursive halving-doubling), run under mpirun:
//
//   mpirun -n 4 --oversubscribe ./build/bench/bench_allreduce --algos mpi,ring,rhd
//
// time = mean over a block of iterations of the slowest rank; --repeats blocks per size and
// algorithm, timed interleaved with the other algorithms (so background load hits all alike);
// the median block is reported with the fastest and slowest beside it (the run-to-run spread).
// algbw = bytes / time; busbw = algbw * 2(n-1)/n (the bytes each rank must send and
// receive in a bandwidth-optimal all-reduce). minflt/it = minor page faults per all-reduce,
// averaged over ranks; sys% = share of the ranks' CPU time spent in the kernel (both from
// getrusage over the timed blocks): a message that page-faults on every call shows up there.
#include <brisk/brisk.h>
#include <brisk/kernels/elementwise.h>
#include <brisk/util/cli.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_host.h"

using namespace brisk;
using brisk::bench::cpu_model;

namespace {

// "8", "64K", "16M", "1G" -> bytes.
int64_t parse_bytes(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? end : "";
  double mult = unit.empty() || unit == "B"      ? 1
                : (unit == "K" || unit == "KiB") ? 1024.0
                : (unit == "M" || unit == "MiB") ? 1024.0 * 1024
                : (unit == "G" || unit == "GiB") ? 1024.0 * 1024 * 1024
                                                 : -1;
  BRISK_CHECK(v > 0 && mult > 0, "bench_allreduce: cannot read size '", s, "' (examples: 8, 64K, 16M, 1G)");
  return static_cast<int64_t>(v * mult);
}

struct Usage {
  double minflt = 0, user_s = 0, sys_s = 0;
};

Usage usage_now() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);  // every thread of this process (the communication thread too)
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return {static_cast<double>(r.ru_minflt), sec(r.ru_utime), sec(r.ru_stime)};
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string algos = "mpi,ring,rhd", min_s = "8", max_s = "256M", dtype_s = "f32";
  int iters = 20, warmup = 2, repeats = 5;
  double step = 2;
  bool check = true;
  cli::Parser p("bench_allreduce",
                "All-reduce bandwidth sweep (nccl-tests columns) for MPI and brisk's algorithms; run it under mpirun.");
  p.add("algos", "comma-separated algorithms: mpi, ring, rhd", &algos);
  p.add("min_bytes", "smallest message (suffixes K, M, G)", &min_s);
  p.add("max_bytes", "largest message (suffixes K, M, G)", &max_s);
  p.add("step_factor", "multiply the size by this each step", &step);
  p.add("iters", "timed iterations per size (fewer for big sizes: at most ~2 GiB moved per measurement)", &iters);
  p.add("warmup", "untimed iterations before each timed block", &warmup);
  p.add("repeats",
        "timed blocks per size and algorithm (interleaved); the median is reported, the fastest and slowest beside it",
        &repeats);
  p.add("dtype", "element type: f32, f16, bf16, i32, i64, u8, f64", &dtype_s);
  p.add("check", "verify each algorithm's result once per size", &check);
  if (!p.parse(argc, argv)) return p.exit_code();

  try {
    auto& pg = dist::init();
    const int W = pg.size(), me = pg.rank();
    const DType dt = dtype_from_name(dtype_s);
    const int64_t es = static_cast<int64_t>(dtype_size(dt));
    const int64_t lo = std::max(parse_bytes(min_s), es), hi = parse_bytes(max_s);
    BRISK_CHECK(step > 1, "bench_allreduce: --step_factor must be > 1, got ", step);
    std::vector<dist::Algorithm> list;
    for (auto& a : cli::split_comma_list(algos)) list.push_back(dist::algorithm_from_name(a));

    if (me == 0) {
      char host[256] = {};
      gethostname(host, sizeof(host));
      std::time_t now = std::time(nullptr);
      char date[64];
      std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M", std::localtime(&now));
      std::printf("# bench_allreduce: %d processes (%d on this host), backend %s, dtype %s, %s\n", W, pg.local_size(),
                  pg.backend().c_str(), dtype_name(dt), date);
      std::printf("# host %s: %s, %ld cores\n", host, cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
      std::printf(
          "# time: mean per iteration of the slowest rank, median of %d interleaved blocks (min, max beside it);"
          " busbw = algbw * 2(n-1)/n\n",
          repeats);
      std::printf("#%11s %12s %6s %6s %11s %10s %10s %11s %11s %9s %5s %7s\n", "size", "count", "type", "algo",
                  "time(us)", "min(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)", "minflt/it", "sys%", "#wrong");
    }
    for (double sz = static_cast<double>(lo); sz <= static_cast<double>(hi) * 1.0001; sz *= step) {
      const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(sz) / es);
      const int64_t bytes = count * es;
      // Fewer iterations for big messages: ~2 GiB through each measurement at most.
      const int n_iter = static_cast<int>(std::clamp<int64_t>((int64_t{2} << 30) / bytes, 3, iters));
      Tensor buf = zeros({count}, {.dtype = dt});  // zeros stay zeros: no overflow, no denormals
      // Each repeat times every algorithm once, interleaved, so that a burst of load from
      // other programs hits them alike; the median repeat is reported.
      std::vector<std::vector<double>> times(list.size());
      std::vector<Usage> used(list.size());
      std::vector<int64_t> wrong(list.size(), 0);
      for (size_t a = 0; a < list.size(); ++a) {
        if (!check) break;
        // every rank contributes rank+1: each element must become W(W+1)/2
        Tensor c = full({count}, me + 1.0, {.dtype = dt});
        pg.all_reduce(c, {.op = dist::ReduceOp::Sum, .algorithm = list[a]});
        for (double x : kernels::cast(c, DType::F64).to_vector<double>()) wrong[a] += x != W * (W + 1) / 2.0;
      }
      for (int rep = 0; rep < repeats; ++rep) {
        for (size_t a = 0; a < list.size(); ++a) {
          dist::AllReduceOptions o{.op = dist::ReduceOp::Sum, .algorithm = list[a]};
          for (int i = 0; i < warmup; ++i) pg.all_reduce(buf, o);
          pg.barrier();
          const Usage u0 = usage_now();
          auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < n_iter; ++i) pg.all_reduce(buf, o);
          double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n_iter;
          const Usage u1 = usage_now();
          used[a].minflt += (u1.minflt - u0.minflt) / n_iter;
          used[a].user_s += u1.user_s - u0.user_s;
          used[a].sys_s += u1.sys_s - u0.sys_s;
          Tensor slowest = from_vector<double>({us}, {1});
          pg.all_reduce(slowest, {.op = dist::ReduceOp::Max, .algorithm = dist::Algorithm::Backend});
          times[a].push_back(slowest.item<double>());
        }
      }
      Tensor w = from_vector<int64_t>(wrong, {static_cast<int64_t>(wrong.size())});
      pg.all_reduce(w, {.op = dist::ReduceOp::Sum, .algorithm = dist::Algorithm::Backend});
      auto wrong_all = w.to_vector<int64_t>();
      // Faults and CPU seconds summed over the ranks.
      std::vector<double> u;
      for (const Usage& x : used) u.insert(u.end(), {x.minflt, x.user_s, x.sys_s});
      Tensor ut = from_vector<double>(u, {static_cast<int64_t>(u.size())});
      pg.all_reduce(ut, {.op = dist::ReduceOp::Sum, .algorithm = dist::Algorithm::Backend});
      u = ut.to_vector<double>();
      for (size_t a = 0; a < list.size() && me == 0; ++a) {
        const double med = median_of(times[a]);
        const double lo_t = *std::min_element(times[a].begin(), times[a].end());
        const double hi_t = *std::max_element(times[a].begin(), times[a].end());
        double algbw = static_cast<double>(bytes) / (med * 1e3);  // GB/s = bytes / us / 1e3
        double busbw = algbw * 2.0 * (W - 1) / W;
        const double flt = u[3 * a] / (repeats * W), cpu = u[3 * a + 1] + u[3 * a + 2];
        std::printf("%12lld %12lld %6s %6s %11.1f %10.1f %10.1f %11.3f %11.3f %9.0f %5.0f %7lld\n",
                    static_cast<long long>(bytes), static_cast<long long>(count), dtype_name(dt),
                    list[a] == dist::Algorithm::Backend ? pg.backend().c_str() : dist::algorithm_name(list[a]), med,
                    lo_t, hi_t, algbw, busbw, flt, cpu > 0 ? 100.0 * u[3 * a + 2] / cpu : 0.0,
                    static_cast<long long>(wrong_all[a]));
        std::fflush(stdout);
      }
    }
    dist::finalize();
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
  return 0;
}
