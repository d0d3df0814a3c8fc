// The profiler's recorder: a stack of open scopes and a table of finished ones per thread, merged
// by name when read; BRISK_PROFILE read once; the report written at exit.
#include "brisk/core/profiler.h"

#include "brisk/core/allocator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "brisk/util/env.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "brisk/util/trace.h"

namespace brisk::profiler {

namespace detail {
std::atomic<int> g_state{-1};
}  // namespace detail

namespace {

struct Stat {
  int64_t calls = 0;
  int64_t total_ns = 0, self_ns = 0;
  int64_t self_allocs = 0, self_bytes = 0;
  int64_t allocs = 0, bytes = 0;

  void add(const Stat& o) {
    calls += o.calls;
    total_ns += o.total_ns;
    self_ns += o.self_ns;
    self_allocs += o.self_allocs;
    self_bytes += o.self_bytes;
    allocs += o.allocs;
    bytes += o.bytes;
  }
};

struct Frame {
  const char* name;
  int64_t start_ns;
  int64_t child_ns = 0;
  int64_t allocs = 0, bytes = 0;              // made directly in this scope
  int64_t child_allocs = 0, child_bytes = 0;  // made in scopes inside it
};

// One thread's recording. The stack is the owner's alone; `stats` is written by the owner and
// read by key_averages()/reset() from any thread, hence the (uncontended) mutex.
struct ThreadData {
  std::mutex m;
  std::unordered_map<const char*, Stat> stats;
  std::vector<Frame> stack;
  int tid = 0;
};

// Never destroyed: the at-exit report and other threads' exits may run after static destructors.
struct Registry {
  std::mutex m;
  std::vector<std::shared_ptr<ThreadData>> live;
  std::map<std::string, Stat> retired;  // rows of threads that have exited
  int next_tid = 2;                     // 0: the main thread; 1 is the trace's communication thread
  std::set<int> free_tids;              // of exited threads, handed out again (smallest first)
  std::string report_path;              // "" stderr
  bool report_registered = false;
  std::unordered_set<std::string> names;  // intern()
  std::mutex init_m;
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// Read during the library's static initialisation, which runs on the process's main thread.
const std::thread::id g_main_thread = std::this_thread::get_id();

std::atomic<int64_t> g_allocs{0}, g_alloc_bytes{0}, g_steps{0};
// The CPU allocator's system allocations when the last step began (-1: no step yet), and how
// many the last complete step made (-1: none complete yet).
std::atomic<int64_t> g_sys_at_step{-1}, g_sys_last_step{-1};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Folds a finished thread's rows into the registry when the thread exits.
struct ThreadHolder {
  std::shared_ptr<ThreadData> data;
  ~ThreadHolder() {
    if (!data) return;
    Registry& r = registry();
    std::lock_guard lk(r.m);
    {
      std::lock_guard dl(data->m);
      for (const auto& [name, s] : data->stats) r.retired[name].add(s);
      data->stats.clear();
    }
    r.live.erase(std::remove(r.live.begin(), r.live.end(), data), r.live.end());
    // The next thread takes this one's row in the trace (a loader's workers come and go each epoch).
    if (data->tid >= 2) r.free_tids.insert(data->tid);
  }
};

ThreadData& this_thread_data() {
  thread_local ThreadHolder holder;
  if (!holder.data) [[unlikely]] {
    auto d = std::make_shared<ThreadData>();
    Registry& r = registry();
    std::lock_guard lk(r.m);
    if (std::this_thread::get_id() == g_main_thread) {
      d->tid = 0;
    } else if (!r.free_tids.empty()) {
      d->tid = *r.free_tids.begin();
      r.free_tids.erase(r.free_tids.begin());
    } else {
      d->tid = r.next_tid++;
    }
    r.live.push_back(d);
    holder.data = std::move(d);
  }
  return *holder.data;
}

// "prof.txt" -> "prof.rank1.txt" when the process is one of several (mpirun / brisk launch), so
// the ranks do not overwrite each other's report.
std::string path_for_rank(const std::string& path) {
  std::optional<std::string> size = envvar::get("OMPI_COMM_WORLD_SIZE"), rank = envvar::get("OMPI_COMM_WORLD_RANK");
  if (!size || !rank) {
    size = envvar::get("WORLD_SIZE");
    rank = envvar::get("RANK");
  }
  if (!size || !rank) return path;
  const std::optional<int64_t> n = parse_integer<int64_t>(*size);
  const std::optional<int64_t> r = parse_integer<int64_t>(*rank);
  if (!n || *n <= 1 || !r) return path;
  const std::string tag = ".rank" + std::to_string(*r);
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0 ||
      (slash != std::string::npos && dot == slash + 1))
    return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

void write_report_at_exit() {
  try {
    Registry& r = registry();
    std::string path;
    {
      std::lock_guard lk(r.m);
      path = r.report_path;
    }
    const std::string text = table();
    if (path.empty()) {
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    } else {
      io::write_file_atomic(path, text, "BRISK_PROFILE report");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brisk: BRISK_PROFILE: %s\n", e.what());
  }
}

std::string format_time(double us) {
  char buf[64];
  if (us >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  else if (us >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3fus", us);
  return buf;
}

std::string format_memory(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f Gb", b / (1024.0 * 1024.0 * 1024.0));
  else if (bytes >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f Mb", b / (1024.0 * 1024.0));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.2f Kb", b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld b", static_cast<long long>(bytes));
  return buf;
}

std::string format_percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

}  // namespace

namespace detail {

int init_state() {
  Registry& r = registry();
  std::lock_guard lk(r.init_m);
  const int s = g_state.load(std::memory_order_acquire);
  if (s >= 0) return s;
  int state = 0;
  // An unreadable value must not throw out of a Scope: a word that is not a boolean is a path.
  if (const std::optional<std::string> v = envvar::get("BRISK_PROFILE")) {
    if (const std::optional<bool> on = parse_bool_word(*v)) {
      state = *on ? 1 : 0;
      if (*on) report_at_exit("");
    } else {
      state = 1;
      report_at_exit(path_for_rank(*v));
    }
  }
  g_state.store(state, std::memory_order_release);
  return state;
}

void push(const char* name) {
  ThreadData& t = this_thread_data();
  t.stack.push_back(Frame{name, 0});
  t.stack.back().start_ns = now_ns();  // last, so the bookkeeping is not timed
}

void pop() {
  const int64_t end = now_ns();
  ThreadData& t = this_thread_data();
  if (t.stack.empty()) return;
  const Frame f = t.stack.back();
  t.stack.pop_back();
  const int64_t total = end - f.start_ns;
  const int64_t allocs = f.allocs + f.child_allocs, bytes = f.bytes + f.child_bytes;
  {
    std::lock_guard lk(t.m);
    Stat& s = t.stats[f.name];
    ++s.calls;
    s.total_ns += total;
    s.self_ns += total - f.child_ns;
    s.self_allocs += f.allocs;
    s.self_bytes += f.bytes;
    s.allocs += allocs;
    s.bytes += bytes;
  }
  if (!t.stack.empty()) {
    Frame& parent = t.stack.back();
    parent.child_ns += total;
    parent.child_allocs += allocs;
    parent.child_bytes += bytes;
  }
  // With BRISK_TRACE as well, one "X" event of category "op" on the scope's thread (steady-clock
  // microseconds, the clock the trace uses).
  if (trace_enabled())
    trace_complete(f.name, "op", static_cast<double>(f.start_ns) / 1e3, static_cast<double>(end) / 1e3, t.tid);
}

void on_alloc(int64_t nbytes) {
  if (!enabled()) return;
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  g_alloc_bytes.fetch_add(nbytes, std::memory_order_relaxed);
  ThreadData& t = this_thread_data();
  if (t.stack.empty()) return;
  ++t.stack.back().allocs;
  t.stack.back().bytes += nbytes;
}

}  // namespace detail

void enable() {
  detail::init_state();  // BRISK_PROFILE=<file> still names the report
  detail::g_state.store(1, std::memory_order_release);
}

void disable() {
  detail::init_state();
  detail::g_state.store(0, std::memory_order_release);
}

void reset() {
  Registry& r = registry();
  std::lock_guard lk(r.m);
  r.retired.clear();
  for (const auto& d : r.live) {
    std::lock_guard dl(d->m);
    d->stats.clear();
  }
  g_allocs.store(0);
  g_alloc_bytes.store(0);
  g_steps.store(0);
  g_sys_at_step.store(-1);
  g_sys_last_step.store(-1);
}

void report_at_exit(const std::string& path) {
  Registry& r = registry();
  std::lock_guard lk(r.m);
  r.report_path = path;
  if (!r.report_registered) {
    r.report_registered = true;
    std::atexit(write_report_at_exit);
  }
}

void step() {
  if (!enabled()) return;
  g_steps.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = cpu_allocator_stats().system_allocs;
  const int64_t before = g_sys_at_step.exchange(now);
  if (before >= 0) g_sys_last_step.store(now - before);
}

std::vector<Row> key_averages() {
  std::map<std::string, Stat> merged;
  {
    Registry& r = registry();
    std::lock_guard lk(r.m);
    merged = r.retired;
    for (const auto& d : r.live) {
      std::lock_guard dl(d->m);
      for (const auto& [name, s] : d->stats) merged[name].add(s);
    }
  }
  std::vector<Row> rows;
  rows.reserve(merged.size());
  for (const auto& [name, s] : merged) {
    Row row;
    row.name = name;
    row.calls = s.calls;
    row.cpu_total_us = static_cast<double>(s.total_ns) / 1e3;
    row.self_cpu_us = static_cast<double>(s.self_ns) / 1e3;
    row.cpu_avg_us = s.calls > 0 ? row.cpu_total_us / static_cast<double>(s.calls) : 0.0;
    row.self_allocs = s.self_allocs;
    row.self_alloc_bytes = s.self_bytes;
    row.allocs = s.allocs;
    row.alloc_bytes = s.bytes;
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.self_cpu_us > b.self_cpu_us; });
  return rows;
}

Totals totals() {
  Totals t;
  for (const Row& r : key_averages()) t.self_cpu_us += r.self_cpu_us;
  t.allocs = g_allocs.load();
  t.alloc_bytes = g_alloc_bytes.load();
  t.steps = g_steps.load();
  t.system_allocs_last_step = g_sys_last_step.load();
  return t;
}

std::string table(std::string_view sort_by, int row_limit) {
  std::vector<Row> rows = key_averages();
  auto by = [&](auto key) {
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) { return key(a) > key(b); });
  };
  if (sort_by == "self_cpu_time_total") {
    // key_averages() is already in this order
  } else if (sort_by == "cpu_time_total") {
    by([](const Row& r) { return r.cpu_total_us; });
  } else if (sort_by == "cpu_time_avg") {
    by([](const Row& r) { return r.cpu_avg_us; });
  } else if (sort_by == "count") {
    by([](const Row& r) { return r.calls; });
  } else if (sort_by == "self_cpu_memory_usage") {
    by([](const Row& r) { return r.self_alloc_bytes; });
  } else if (sort_by == "name") {
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.name < b.name; });
  } else {
    BRISK_THROW("profiler::table: unknown sort_by '", sort_by,
                "' (expected self_cpu_time_total, cpu_time_total, cpu_time_avg, count, self_cpu_memory_usage or "
                "name)");
  }
  double self_total = 0;
  for (const Row& r : rows) self_total += r.self_cpu_us;
  if (row_limit >= 0 && rows.size() > static_cast<size_t>(row_limit)) rows.resize(static_cast<size_t>(row_limit));

  constexpr size_t kMaxName = 55;
  size_t name_w = 4;
  for (const Row& r : rows) name_w = std::max(name_w, std::min(r.name.size(), kMaxName));
  constexpr int kCol = 14;
  const char* headers[] = {"Self CPU %",   "Self CPU",    "CPU total %",    "CPU total",
                           "CPU time avg", "Self Allocs", "Self Alloc Mem", "# of Calls"};
  constexpr int kCols = 8;

  std::ostringstream os;
  auto rule = [&] {
    os << std::string(name_w, '-');
    for (int i = 0; i < kCols; ++i) os << "  " << std::string(kCol, '-');
    os << '\n';
  };
  auto cell = [&](const std::string& s) {
    os << "  ";
    if (s.size() < kCol) os << std::string(kCol - s.size(), ' ');
    os << s;
  };
  auto name_cell = [&](std::string s) {
    if (s.size() > kMaxName) s = s.substr(0, kMaxName - 3) + "...";
    os << s << std::string(name_w - s.size(), ' ');
  };
  rule();
  name_cell("Name");
  for (const char* h : headers) cell(h);
  os << '\n';
  rule();
  for (const Row& r : rows) {
    name_cell(r.name);
    cell(format_percent(r.self_cpu_us, self_total));
    cell(format_time(r.self_cpu_us));
    cell(format_percent(r.cpu_total_us, self_total));
    cell(format_time(r.cpu_total_us));
    cell(format_time(r.cpu_avg_us));
    cell(std::to_string(r.self_allocs));
    cell(format_memory(r.self_alloc_bytes));
    cell(std::to_string(r.calls));
    os << '\n';
  }
  rule();
  const int64_t allocs = g_allocs.load(), bytes = g_alloc_bytes.load(), steps = g_steps.load();
  os << "Self CPU time total: " << format_time(self_total) << '\n';
  os << "Allocations: " << allocs << " (" << format_memory(bytes) << ")";
  if (steps > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(allocs) / static_cast<double>(steps));
    os << ", " << buf << " (" << format_memory(bytes / steps) << ") per step over " << steps << " steps";
  }
  os << '\n';
  if (const int64_t sys = g_sys_last_step.load(); sys >= 0)
    os << "Allocations from the system in the last step: " << sys
       << (cpu_allocator_stats().caching ? " (the rest came from the CPU allocator's cache)\n"
                                         : " (the CPU allocator's cache is off)\n");
  return os.str();
}

const char* intern(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lk(r.m);
  return r.names.emplace(name).first->c_str();
}

}  // namespace brisk::profiler
