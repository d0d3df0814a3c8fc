// A per-op profiler, like torch.profiler's key_averages(): named scopes are timed on the thread
// that runs them, nested scopes give each name its self time (inclusive time minus the time of
// the scopes inside it), and the rows aggregate every call of a name.
//
//   profiler::enable();
//   { profiler::Scope s("my_block"); ... }          // brisk's ops, backward nodes, optimizers,
//   train_step();                                   // data loaders already record their scopes
//   std::cerr << profiler::table("self_cpu_time_total", 20);
//
// Switches (docs/profiling.md): BRISK_PROFILE=1 (prints the table to stderr at exit),
// BRISK_PROFILE=<file> (writes it there at exit), BRISK_PROFILE=0 (off, the default), the
// Accelerator's `profile` option, or enable()/disable() here. With BRISK_TRACE set as well every
// scope is also a Chrome-trace "X" event (category "op") on the thread that ran it.
//
// Disabled, a Scope costs one relaxed atomic load. Enabled, it reads the steady clock twice and
// updates a per-thread table (no lock shared between threads on the hot path).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brisk::profiler {

namespace detail {
// -1: BRISK_PROFILE not read yet, 0: off, 1: on.
extern std::atomic<int> g_state;
int init_state();  // reads BRISK_PROFILE once; returns the state
void push(const char* name);
void pop();
void on_alloc(int64_t nbytes);
}  // namespace detail

// True while scopes are recorded.
inline bool enabled() {
  int s = detail::g_state.load(std::memory_order_relaxed);
  if (s < 0) [[unlikely]]
    s = detail::init_state();
  return s == 1;
}

// Starts / stops recording (what is recorded is kept until reset()).
void enable();
void disable();
// Forgets every recorded row, the step count and the allocation counters.
void reset();

// Writes table() at exit: to `path`, or to stderr when `path` is empty. BRISK_PROFILE calls it;
// the last call wins.
void report_at_exit(const std::string& path = "");

// Marks the end of a training step (Optimizer::step calls it once per update that runs), so the
// table's footer can give allocations per step.
void step();

// One row of key_averages(): every call of one name, on every thread.
struct Row {
  std::string name;
  int64_t calls = 0;
  double cpu_total_us = 0;  // inclusive: the scope and everything inside it
  double self_cpu_us = 0;   // inclusive minus the scopes inside it
  double cpu_avg_us = 0;    // cpu_total_us / calls
  int64_t self_allocs = 0;  // storage allocations made directly inside (not in an inner scope)
  int64_t self_alloc_bytes = 0;
  int64_t allocs = 0;  // inclusive
  int64_t alloc_bytes = 0;
};

// Every name recorded since the last reset(), sorted by self time (largest first).
std::vector<Row> key_averages();

struct Totals {
  double self_cpu_us = 0;  // the sum of every row's self time
  int64_t allocs = 0;      // every storage allocation while enabled, in a scope or not
  int64_t alloc_bytes = 0;
  int64_t steps = 0;  // step() calls while enabled
  // Blocks the CPU allocator took from the system between the last two step() calls (-1 before
  // the second step): 0 in a steady training loop, whose tensors come from the allocator's cache.
  int64_t system_allocs_last_step = -1;
};
Totals totals();

// key_averages() as a text table like PyTorch's key_averages().table(): Name, Self CPU %,
// Self CPU, CPU total %, CPU total, CPU time avg, Self Allocs, Self Alloc Mem, # of Calls, and a
// footer with "Self CPU time total" and the allocations (per step when steps were marked).
// sort_by: "self_cpu_time_total" (default), "cpu_time_total", "cpu_time_avg", "count",
// "self_cpu_memory_usage" (self allocated bytes) or "name"; anything else throws brisk::Error.
// row_limit < 0: every row.
std::string table(std::string_view sort_by = "self_cpu_time_total", int row_limit = -1);

// A stable copy of `name` for Scope (names built at run time: "Conv2dBackward", "Adam.step").
// Equal strings give the same pointer.
const char* intern(std::string_view name);

// An RAII scope: times [construction, destruction) under `name` (a string that outlives the
// profiler: a literal, or intern()).
class Scope {
 public:
  explicit Scope(const char* name) {
    if (enabled()) [[unlikely]] {
      detail::push(name);
      active_ = true;
    }
  }
  ~Scope() {
    if (active_) [[unlikely]]
      detail::pop();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace brisk::profiler
