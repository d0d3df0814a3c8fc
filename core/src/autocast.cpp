// Thread-local autocast state.
#include "brisk/core/autocast.h"

namespace brisk {

namespace {
thread_local AutocastState tl_state;
}

AutocastState autocast_state() {
  return tl_state;
}
void set_autocast_state(AutocastState s) {
  tl_state = s;
}

}  // namespace brisk
