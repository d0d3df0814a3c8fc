// bench_checkpoint: save_state + load_state of a ~1 GB checkpoint (a model of large Linear layers
// with Adam's two state tensors per parameter: model + optimizer ≈ 12 bytes per parameter), in
// MB/s of checkpoint bytes, next to SHA-256 alone and a plain write + fsync + read of the same
// number of bytes (what the disk allows). Results: bench/RESULTS.md.
//
//   bench_checkpoint [--mb 1000] [--reps 3] [--dir /tmp/brisk_bench_checkpoint]
#include <brisk/brisk.h>
#include <fcntl.h>
#include <unistd.h>

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

struct Big : nn::Module {
  std::vector<std::unique_ptr<nn::Linear>> layers;
  Big(int64_t width, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      layers.push_back(std::make_unique<nn::Linear>(width, width));
      std::string name = "l";  // (not "l" + ...: GCC 12 warns falsely about that at -O3)
      name += std::to_string(i);
      register_module(name, *layers.back());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  cli::Parser p("bench_checkpoint", "save_state + load_state throughput of a ~1 GB checkpoint.");
  int64_t mb = 1000, reps = 3;
  std::string dir = "/tmp/brisk_bench_checkpoint";
  p.add("mb", "checkpoint size in MB (10^6 bytes), model + Adam state", &mb);
  p.add("reps", "repetitions (the median is reported)", &reps);
  p.add("dir", "where to write (a local disk)", &dir);
  if (!p.parse(argc, argv)) return p.exit_code();

  // 12 bytes per parameter (f32 weights, exp_avg, exp_avg_sq); layers of width 2048.
  const int64_t width = 2048;
  const int64_t per_layer = width * width + width;
  const int64_t layers = std::max<int64_t>(1, mb * 1000000 / (12 * per_layer));
  Accelerator acc;
  Big net(width, layers);
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  for (const Tensor& t : net.parameters()) t.set_grad(zeros_like(t));
  opt.step();  // creates Adam's state
  opt.zero_grad();
  acc.prepare(net, opt);

  const fs::path ckpt = fs::path(dir) / "ckpt";
  fs::create_directories(dir);
  std::vector<double> save_s, load_s;
  int64_t bytes = 0;
  for (int64_t r = 0; r < reps; ++r) {
    double t0 = now();
    acc.save_state(ckpt.string());
    save_s.push_back(now() - t0);
    bytes = folder_bytes(ckpt);
    t0 = now();
    acc.load_state(ckpt.string());
    load_s.push_back(now() - t0);
  }
  // SHA-256 alone, and the disk: write + fsync + read back the same number of bytes.
  std::string buf(static_cast<size_t>(256) << 20, '\x5a');
  double t0 = now();
  accelerate::sha256_hex(buf);
  const double sha_mbs = static_cast<double>(buf.size()) / 1e6 / (now() - t0);
  const fs::path raw = fs::path(dir) / "raw.bin";
  std::vector<double> write_s, read_s;
  for (int64_t r = 0; r < reps; ++r) {
    t0 = now();
    int fd = ::open(raw.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int64_t done = 0; done < bytes; done += static_cast<int64_t>(buf.size()))
      if (::write(fd, buf.data(), static_cast<size_t>(std::min<int64_t>(buf.size(), bytes - done))) < 0) return 1;
    ::fsync(fd);
    ::close(fd);
    write_s.push_back(now() - t0);
    t0 = now();
    fd = ::open(raw.c_str(), O_RDONLY);
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
    read_s.push_back(now() - t0);
  }
  fs::remove(raw);
  fs::remove_all(ckpt);

  const double mbytes = static_cast<double>(bytes) / 1e6;
  std::printf("# bench_checkpoint: %lld layers Linear(%lld, %lld) + Adam, checkpoint %.0f MB in %s\n",
              static_cast<long long>(layers), static_cast<long long>(width), static_cast<long long>(width), mbytes,
              dir.c_str());
  std::printf("# host: %s, %u cores; median of %lld\n", cpu_model().c_str(), std::thread::hardware_concurrency(),
              static_cast<long long>(reps));
  std::printf("save_state      %7.2f s  %7.0f MB/s\n", median(save_s), mbytes / median(save_s));
  std::printf("load_state      %7.2f s  %7.0f MB/s\n", median(load_s), mbytes / median(load_s));
  std::printf("sha256 alone              %7.0f MB/s\n", sha_mbs);
  std::printf("write+fsync     %7.2f s  %7.0f MB/s   (same bytes, one file)\n", median(write_s),
              mbytes / median(write_s));
  std::printf("read            %7.2f s  %7.0f MB/s   (page cache warm, as for load_state above)\n", median(read_s),
              mbytes / median(read_s));
  return 0;
}
