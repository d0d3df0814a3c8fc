// bench_async_save: how long save_state blocks the training loop with async_save (the state copied
// out, the files written, hashed and published on a background thread) against a synchronous save,
// for the GPT-2 example's state (its model and AdamW's two state tensors per parameter, as
// `examples/gpt2 --checkpoint_every` saves it), per preset. Also the whole save's time (save_state
// plus the wait for the background write). Median of --reps saves each. Results: bench/RESULTS.md.
//
//   bench_async_save [--presets tiny,small,124M] [--reps 5] [--dir /tmp/brisk_bench_async_save]
#include <brisk/brisk.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_host.h"

using namespace brisk;
using brisk::bench::cpu_model;
using brisk::bench::folder_bytes;
using brisk::bench::median;
using brisk::bench::now;
namespace fs = std::filesystem;

namespace {

struct Timing {
  std::vector<double> blocked, total;  // seconds: save_state's return; save_state + wait_for_save
  int64_t bytes = 0;
};

// `reps` saves of one preset's state with async_save on or off, into a fresh project folder
// (automatic naming, the last two kept, as the example does).
Timing run(const std::string& preset, bool async, int64_t reps, const fs::path& dir) {
  fs::remove_all(dir);
  Accelerator acc({.seed = 1337,
                   .project_dir = dir.string(),
                   .automatic_checkpoint_naming = true,
                   .total_limit = 2,
                   .async_save = async});
  models::GPT2 net(models::GPT2Config::preset(preset));
  optim::AdamW opt(net.param_groups({.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1}));
  for (const Tensor& t : net.parameters()) t.set_grad(zeros_like(t));
  opt.step();  // creates AdamW's state, as after the first training step
  opt.zero_grad();
  acc.prepare(net, opt);
  Timing t;
  for (int64_t r = 0; r < reps; ++r) {
    const double t0 = now();
    const std::string saved = acc.save_state();
    const double t1 = now();
    acc.wait_for_save();  // (synchronous: returns at once)
    t.blocked.push_back(t1 - t0);
    t.total.push_back(now() - t0);
    t.bytes = folder_bytes(saved);
  }
  fs::remove_all(dir);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  cli::Parser p("bench_async_save", "save_state's blocking time with and without async_save, GPT-2 + AdamW state.");
  std::string presets = "tiny,small,124M";
  int64_t reps = 5;
  std::string dir = "/tmp/brisk_bench_async_save";
  p.add("presets", "GPT-2 presets, comma separated (tiny: the example's default; 124M: GPT-2 small)", &presets);
  p.add("reps", "saves per preset and mode (the median is reported)", &reps);
  p.add("dir", "where to write (a local disk)", &dir);
  if (!p.parse(argc, argv)) return p.exit_code();

  std::printf("# bench_async_save: GPT-2 + AdamW state, saves into %s (automatic naming, total_limit 2)\n",
              dir.c_str());
  std::printf("# host: %s, %u cores; median of %lld saves\n", cpu_model().c_str(), std::thread::hardware_concurrency(),
              static_cast<long long>(reps));
  std::printf("%-6s %9s %14s %14s %14s %10s\n", "preset", "MB", "sync save s", "async block s", "async total s",
              "sync/async");
  for (const std::string& preset : cli::split_comma_list(presets)) {
    const Timing sync = run(preset, false, reps, dir);
    const Timing async = run(preset, true, reps, dir);
    std::printf("%-6s %9.1f %14.4f %14.4f %14.4f %9.1fx\n", preset.c_str(), static_cast<double>(sync.bytes) / 1e6,
                median(sync.blocked), median(async.blocked), median(async.total),
                median(sync.blocked) / median(async.blocked));
    std::fflush(stdout);
  }
  return 0;
}
