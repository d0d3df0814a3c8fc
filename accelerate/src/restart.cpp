// Continuing after `brisk launch --max-restarts` started a failed job again (docs/fault-tolerance.md):
// the restart count, the newest complete checkpoint, the load a restarted program does by itself,
// and the fault a test injects on the first attempt (BRISK_FAULT_KILL_AT_STEP).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

#include "accelerator_impl.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/kernels/factory.h"
#include "brisk/util/env.h"
#include "brisk/util/trace.h"
#include "checkpoint_format.h"

namespace brisk {

namespace fs = std::filesystem;
using namespace accelerate::detail;

namespace accelerate {

int restart_count() {
  return static_cast<int>(envvar::get_int(env::kRestartCount, 0, 0, std::numeric_limits<int>::max()));
}

}  // namespace accelerate

// BRISK_TRACE under --max-restarts: every attempt keeps its own trace, <path>.rank<r>.json on the
// first and <path>.restart<k>.rank<r>.json on the k-th restart, so that a restart's timeline has
// both sides of it (docs/fault-tolerance.md).
void accelerate::detail::trace_this_attempt() {
  const int restart = accelerate::restart_count();
  const std::optional<std::string> path = envvar::get("BRISK_TRACE");
  if (restart == 0 || !path || path->empty() || !trace_enabled()) return;
  std::string base = *path;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
  trace_set_path(base + ".restart" + std::to_string(restart));
}

std::string Accelerator::newest_checkpoint() {
  finish_save();  // a save still being written in the background
  const fs::path root = checkpoint_root();
  Tensor n = full({1}, -1.0, {.dtype = DType::I64});
  if (is_main_process()) {
    auto existing = numbered_checkpoints(root);
    for (auto it = existing.rbegin(); it != existing.rend(); ++it) {
      std::string why;
      if (accelerate::is_complete_checkpoint(it->second.string(), &why)) {
        n.data<int64_t>()[0] = it->first;
        break;
      }
      // A save cut short (a crash, a kill while writing) leaves a folder without a valid manifest.
      print("Accelerator::load_state: passing over ", it->second.string(), ": ", why);
    }
  }
  if (world_size_ > 1) pg_->broadcast(n, {.root = 0});
  const int64_t k = n.item<int64_t>();
  return k < 0 ? std::string() : (root / ("checkpoint_" + std::to_string(k))).string();
}

std::string Accelerator::resume_on_restart(bool resume) {
  const int restart = accelerate::restart_count();
  // After a preemption (stop_if_preempted left its marker) the same command continues by itself.
  const bool preempted = restart == 0 && !resume && preempted_before();
  if (!resume && restart == 0 && !preempted) return "";
  std::string from = newest_checkpoint();
  if (from.empty()) {
    BRISK_CHECK(!resume, "Accelerator::load_state: no complete checkpoint under '", checkpoint_root(),
                "' to resume from");
    if (preempted)
      print("Accelerator: the last run was preempted, but there is no complete checkpoint under ", checkpoint_root(),
            ": starting from scratch");
    else
      print("Accelerator: restart ", restart, " (BRISK_RESTART_COUNT) found no complete checkpoint under ",
            checkpoint_root(), ": starting from scratch");
    return "";
  }
  load_state(from);
  continues_preempted_ = preempted;
  if (preempted)
    print("Accelerator: the last run was preempted (",
          (fs::path(checkpoint_root()) / accelerate::kPreemptedMarker).string(), "): continuing from ", from);
  if (restart > 0) print("Accelerator: restart ", restart, " (BRISK_RESTART_COUNT) continues from ", from);
  return from;
}

void Accelerator::inject_fault() {
  // BRISK_FAULT_KILL_AT_STEP=N[:RANK]: rank RANK (default 0) kills itself with SIGKILL at its N-th
  // backward (counting from 1), on the job's first attempt only, as an OOM killer or a lost node
  // would: the tests of --max-restarts start from one.
  static const std::optional<std::string> spec = envvar::get("BRISK_FAULT_KILL_AT_STEP");
  if (!spec || accelerate::restart_count() > 0) return;
  ++fault_backwards_;
  const size_t colon = spec->find(':');
  const std::string what = "BRISK_FAULT_KILL_AT_STEP (STEP or STEP:RANK)";
  const int64_t step = parse_integer_in(spec->substr(0, colon), 1, std::numeric_limits<int64_t>::max(), what);
  const int64_t rank = colon == std::string::npos
                           ? 0
                           : parse_integer_in(spec->substr(colon + 1), 0, std::numeric_limits<int>::max(), what);
  if (step == fault_backwards_ && rank == rank_) {
    std::fprintf(stderr, "[brisk rank %d] BRISK_FAULT_KILL_AT_STEP: killing this rank at step %lld\n", rank_,
                 static_cast<long long>(step));
    std::fflush(stderr);
    // The trace so far is written first (a real SIGKILL loses what was not flushed), so that a
    // restart's timeline shows the attempt that failed.
    trace_instant("killed (BRISK_FAULT_KILL_AT_STEP)", "fault");
    trace_flush();
    std::raise(SIGKILL);
  }
}

}  // namespace brisk
