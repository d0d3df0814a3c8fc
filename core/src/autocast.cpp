// Thread-local autocast state and region nesting.
#include "brisk/core/autocast.h"

#include "brisk/core/autocast_cache.h"

namespace brisk {

namespace {
thread_local AutocastState tl_state;
thread_local int tl_nesting = 0;
}  // namespace

AutocastState autocast_state() {
  return tl_state;
}
void set_autocast_state(AutocastState s) {
  tl_state = s;
}

void autocast_enter() {
  ++tl_nesting;
}

void autocast_exit() {
  if (tl_nesting > 0 && --tl_nesting == 0) clear_autocast_cache();
}

int autocast_nesting() {
  return tl_nesting;
}

}  // namespace brisk
