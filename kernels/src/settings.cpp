// The process-wide kernel settings of brisk/kernels/settings.h.
#include "brisk/kernels/settings.h"

#include <atomic>

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

}  // namespace brisk::kernels
