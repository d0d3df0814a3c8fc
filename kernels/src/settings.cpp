// The process-wide kernel settings of brisk/kernels/settings.h.
#include "brisk/kernels/settings.h"

#include <atomic>

#include "brisk/util/error.h"

namespace brisk::kernels {

namespace {
std::atomic<bool> g_deterministic{true};
}  // namespace

void set_deterministic(bool on) {
  g_deterministic.store(on, std::memory_order_relaxed);
}
bool deterministic() {
  return g_deterministic.load(std::memory_order_relaxed);
}

void check_nondeterministic_allowed(const std::string& op, const std::string& why) {
  BRISK_CHECK(!deterministic(), op, ": ", why,
              "; deterministic algorithms are required (kernels::set_deterministic(true), the Accelerator's "
              "deterministic option or BRISK_DETERMINISTIC=1). Allow non-deterministic ones with "
              "kernels::set_deterministic(false) or BRISK_DETERMINISTIC=0");
}

}  // namespace brisk::kernels
