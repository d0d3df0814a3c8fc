// Thread-count control.
#include "brisk/kernels/threads.h"

#include <omp.h>

#include <string_view>
#include <thread>

#include "brisk/util/env.h"

namespace brisk {

void set_num_threads(int n) {
  if (n <= 0) {
    // OMP_NUM_THREADS may give one count per nesting level ("4,2"); the first one is ours. It is
    // parsed exactly (no "4 threads", "0x4" or "1e1"), as every number brisk reads.
    if (const auto env = envvar::get("OMP_NUM_THREADS")) {
      const std::string_view first = std::string_view(*env).substr(0, env->find(','));
      n = static_cast<int>(parse_integer_in(first, 1, 65536, "set_num_threads: OMP_NUM_THREADS"));
    } else {
      n = static_cast<int>(std::thread::hardware_concurrency());
    }
  }
  omp_set_num_threads(n > 0 ? n : 1);
}

int get_num_threads() {
  return omp_get_max_threads();
}

}  // namespace brisk
