// Shared benchmark helpers: run each case on 1 and 2 OpenMP threads.
#pragma once
#include <benchmark/benchmark.h>
#include <omp.h>

namespace brisk::bench {

// Sets the OpenMP thread count from the benchmark's last argument for the scope.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadScope() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace brisk::bench
