// Helpers of the end-to-end benchmarks (bench_checkpoint, bench_async_save, bench_allreduce,
// bench_buckets): a monotonic clock in seconds, the median of a few timings, the CPU's name for
// the report, and the bytes a checkpoint folder holds.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace brisk::bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The upper median (the middle value of an odd count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// /proc/cpuinfo's first "model name", or "unknown".
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// The sizes of the files directly in dir.
inline int64_t folder_bytes(const std::filesystem::path& dir) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) total += static_cast<int64_t>(e.file_size());
  return total;
}

}  // namespace brisk::bench
