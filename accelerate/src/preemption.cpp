// A preempted job saves and stops (docs/fault-tolerance.md, "Preemption"): SIGTERM or SIGUSR1 (what
// a batch system sends before a time limit or a preemption) sets a flag; at a step boundary every
// rank learns whether any rank got one, and then every rank saves a checkpoint and the program exits
// with status 75, leaving a marker so that the same command started again continues from it.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "accelerator_impl.h"
#include "brisk/kernels/factory.h"
#include "brisk/util/env.h"
#include "brisk/util/fs.h"

namespace brisk {

namespace fs = std::filesystem;

namespace {

volatile std::sig_atomic_t g_preempt_signal = 0;  // the first SIGTERM/SIGUSR1 this process received

extern "C" void on_preempt_signal(int sig) {
  if (g_preempt_signal == 0) g_preempt_signal = sig;
}

// Once, at the first should_stop() (or before a test's injected signal): from then on SIGTERM and
// SIGUSR1 no longer end the process but ask it to stop at the next step boundary. SA_RESTART: a
// signal arriving inside a collective's system call does not disturb it.
void install_preemption_handlers() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_preempt_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGUSR1, &sa, nullptr);
    return true;
  }();
  (void)installed;
}

std::string signal_text(int sig) {
  if (sig == SIGTERM) return "SIGTERM";
  if (sig == SIGUSR1) return "SIGUSR1";
  return "signal " + std::to_string(sig);
}

// The parent of `pid` and its command name, read from /proc/<pid>/stat.
std::optional<std::pair<pid_t, std::string>> parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::string state;
  pid_t ppid = 0;
  if (!(rest >> state >> ppid) || ppid <= 1) return std::nullopt;
  std::ifstream comm("/proc/" + std::to_string(ppid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return std::make_pair(ppid, name);
}

// The `brisk launch` this process runs under: the nearest ancestor named "brisk" (its parent for
// one process, its grandparent under mpirun); -1 when there is none.
pid_t launcher_pid() {
  pid_t pid = ::getpid();
  for (int depth = 0; depth < 8; ++depth) {
    const auto up = parent_of(pid);
    if (!up) return -1;
    if (up->second == "brisk") return up->first;
    pid = up->first;
  }
  return -1;
}

}  // namespace

bool Accelerator::should_stop() {
  install_preemption_handlers();
  // Inside a gradient-accumulation window the optimizer step is not done yet: finish it first.
  // Every rank agrees on that without asking (the ranks take the same micro-steps).
  if (!sh_->sync_gradients) return false;
  const int mine = static_cast<int>(g_preempt_signal);
  if (world_size_ == 1) {
    preempt_signal_ = mine;
    preempt_rank_ = 0;
    return mine != 0;
  }
  // One all-reduce (max) of two numbers: the signal, and world - rank for the lowest rank that got
  // one. Every rank gets the same answer, so every rank stops after the same step even when the
  // signal reached the ranks at different times, or only one of them.
  Tensor t = full({2}, 0.0, {.dtype = DType::I64});
  t.data<int64_t>()[0] = mine;
  t.data<int64_t>()[1] = mine != 0 ? world_size_ - rank_ : 0;
  pg_->all_reduce(t, {.op = dist::ReduceOp::Max});
  preempt_signal_ = static_cast<int>(t.data<int64_t>()[0]);
  preempt_rank_ = world_size_ - static_cast<int>(t.data<int64_t>()[1]);
  return preempt_signal_ != 0;
}

void Accelerator::stop_if_preempted() {
  BRISK_CHECK(s_.automatic_checkpoint_naming,
              "Accelerator::stop_if_preempted: a preempted job saves into <project_dir>/checkpoints/checkpoint_<n>; "
              "set automatic_checkpoint_naming (and project_dir) in the AcceleratorOptions");
  if (!should_stop()) return;
  // The step's checkpoint may just have been saved (a program that saves and then checks): no
  // second one of the same state.
  const bool saved_now = !last_auto_save_.empty() && saved_at_step_ == optimizer_steps_;
  const std::string dir = saved_now ? last_auto_save_ : save_state();
  finish_save();  // async_save: the checkpoint complete on disk before the marker names it and we exit
  if (is_main_process()) {
    const fs::path root = checkpoint_root();
    io::write_file_atomic((root / accelerate::kPreemptedMarker).string(),
                          fs::path(dir).filename().string() + "\n" + signal_text(preempt_signal_) + "\n",
                          "Accelerator::stop_if_preempted");
    std::fprintf(stderr,
                 "Accelerator: the job was preempted (%s reached rank %d): every rank stopped after the same "
                 "step (%lld optimizer steps in this run) and saved %s; exiting with status %d: start the same "
                 "command again to continue from it\n",
                 signal_text(preempt_signal_).c_str(), preempt_rank_, static_cast<long long>(optimizer_steps_),
                 dir.c_str(), accelerate::kPreemptedStatus);
  }
  preempted_ = true;
  std::cout.flush();
  std::fflush(nullptr);
  // Every rank leaves the job together (the exit protocol of dist::finalize), so that the status
  // below is not taken for a failing rank that must bring the others down.
  if (dist::is_initialized()) dist::finalize();
  std::exit(accelerate::kPreemptedStatus);
}

void Accelerator::note_automatic_save(const std::string& dir) {
  last_auto_save_ = dir;
  saved_at_step_ = optimizer_steps_;
}

bool Accelerator::preempted_before() {
  const fs::path marker = fs::path(checkpoint_root()) / accelerate::kPreemptedMarker;
  Tensor found = full({1}, 0.0, {.dtype = DType::I64});
  if (is_main_process()) {
    std::error_code ec;
    found.data<int64_t>()[0] = fs::exists(marker, ec) ? 1 : 0;
  }
  if (world_size_ > 1) pg_->broadcast(found, {.root = 0});
  return found.item<int64_t>() != 0;
}

void Accelerator::forget_preemption() {
  // A run that continued after a preemption and ended normally: the next start is a new run again.
  if (!continues_preempted_ || preempted_ || std::uncaught_exceptions() > 0 || !is_main_process()) return;
  std::error_code ec;
  fs::remove(fs::path(checkpoint_root()) / accelerate::kPreemptedMarker, ec);
}

void Accelerator::inject_preemption() {
  // BRISK_FAULT_SIGNAL_AT_STEP=STEP[:RANK[:SIGNAL[:TARGET]]]: at its STEP-th backward (counting
  // from 1), rank RANK (default 0) sends SIGNAL (USR1, the default, or TERM) to itself or, with
  // TARGET `launcher`, to the `brisk launch` it runs under, as a batch system would. Only in a run
  // that did not continue from a checkpoint: the same command started again runs to its end.
  static const std::optional<std::string> spec = envvar::get("BRISK_FAULT_SIGNAL_AT_STEP");
  if (!spec || resumed_ || accelerate::restart_count() > 0) return;
  install_preemption_handlers();  // a signal before the program's first check must not kill it
  ++signal_backwards_;
  const std::string what = "BRISK_FAULT_SIGNAL_AT_STEP (STEP[:RANK[:USR1|TERM[:self|launcher]]])";
  std::vector<std::string> parts;
  std::stringstream ss(*spec);
  for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
  BRISK_CHECK(!parts.empty() && parts.size() <= 4, what, ": got '", *spec, "'");
  const int64_t step = parse_integer_in(parts[0], 1, std::numeric_limits<int64_t>::max(), what);
  const int64_t rank = parts.size() > 1 ? parse_integer_in(parts[1], 0, std::numeric_limits<int>::max(), what) : 0;
  const std::string name = parts.size() > 2 ? parts[2] : "USR1";
  const std::string target = parts.size() > 3 ? parts[3] : "self";
  BRISK_CHECK(name == "USR1" || name == "TERM", what, ": the signal is USR1 or TERM, got '", name, "'");
  BRISK_CHECK(target == "self" || target == "launcher", what, ": the target is self or launcher, got '", target, "'");
  if (step != signal_backwards_ || rank != rank_) return;
  const int sig = name == "USR1" ? SIGUSR1 : SIGTERM;
  const pid_t to = target == "self" ? ::getpid() : launcher_pid();
  BRISK_CHECK(to > 0, what, ": this process runs under no `brisk launch`");
  std::fprintf(stderr, "[brisk rank %d] BRISK_FAULT_SIGNAL_AT_STEP: sending %s to %s (process %d) at step %lld\n",
               rank_, signal_text(sig).c_str(), target == "self" ? "this rank" : "brisk launch", static_cast<int>(to),
               static_cast<long long>(step));
  std::fflush(stderr);
  ::kill(to, sig);
}

}  // namespace brisk
