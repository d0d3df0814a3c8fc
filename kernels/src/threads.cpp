// Thread-count control.
#include "brisk/kernels/threads.h"

#include <omp.h>

#include <cstdlib>
#include <thread>

namespace brisk {

void set_num_threads(int n) {
  if (n <= 0) {
    const char* env = std::getenv("OMP_NUM_THREADS");
    n = env ? std::atoi(env) : 0;
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  }
  omp_set_num_threads(n > 0 ? n : 1);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace brisk
