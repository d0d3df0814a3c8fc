// The BRISK_TRACE recorder: spans in memory behind one mutex, written as Chrome trace JSON
// (the "JSON object format" with a traceEvents array) at exit or on trace_flush().
#include "brisk/util/trace.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "brisk/util/error.h"
#include "brisk/util/fs.h"

namespace brisk {

namespace {

using Clock = std::chrono::steady_clock;

struct Event {
  std::string name, category;
  char ph;  // 'X' complete, 'i' instant
  double ts, dur;
  int tid;
};

// Past this many events new ones are dropped (a long run must not grow without bound);
// the file says so in its metadata.
constexpr size_t kMaxEvents = 2'000'000;

struct Recorder {
  std::mutex m;
  std::string path;  // BRISK_TRACE's value ("" disabled)
  std::vector<Event> events;
  size_t dropped = 0;
  bool atexit_registered = false;
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: the atexit flush may run after statics die
  return *r;
}

// -1: BRISK_TRACE not read yet, 0 off, 1 on.
std::atomic<int> g_state{-1};

void flush_at_exit() {
  try {
    trace_flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brisk: BRISK_TRACE: %s\n", e.what());
  }
}

// Called with the recorder's mutex held.
void set_path_locked(Recorder& r, const std::string& path) {
  r.path = path;
  if (path.empty()) {
    r.events.clear();
    r.dropped = 0;
  } else if (!r.atexit_registered) {
    r.atexit_registered = true;
    std::atexit(flush_at_exit);
  }
  g_state.store(path.empty() ? 0 : 1, std::memory_order_release);
}

bool enabled_slow() {
  Recorder& r = recorder();
  std::lock_guard lk(r.m);
  if (g_state.load(std::memory_order_acquire) < 0) {
    const char* v = std::getenv("BRISK_TRACE");
    set_path_locked(r, v ? v : "");
  }
  return g_state.load(std::memory_order_acquire) == 1;
}

void record(Event e) {
  Recorder& r = recorder();
  std::lock_guard lk(r.m);
  if (r.path.empty()) return;
  if (r.events.size() >= kMaxEvents) {
    ++r.dropped;
    return;
  }
  r.events.push_back(std::move(e));
}

std::atomic<TraceRankSource> g_rank_source{nullptr};

int trace_rank() {
  if (TraceRankSource source = g_rank_source.load(std::memory_order_acquire)) {
    try {
      return source();
    } catch (const std::exception&) {
    }
  }
  return 0;
}

void write_json_string(std::ostream& os, const std::string& s) {
  os << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      os << '\\' << c;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      os << buf;
    } else {
      os << c;
    }
  }
  os << '"';
}

std::string file_for(const std::string& path, int rank) {
  std::string base = path;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
  return base + ".rank" + std::to_string(rank) + ".json";
}

}  // namespace

bool trace_enabled() {
  int s = g_state.load(std::memory_order_acquire);
  if (s >= 0) return s == 1;
  return enabled_slow();
}

void trace_set_path(const std::string& path) {
  Recorder& r = recorder();
  std::lock_guard lk(r.m);
  set_path_locked(r, path);
}

void trace_set_rank_source(TraceRankSource source) {
  g_rank_source.store(source, std::memory_order_release);
}

std::string trace_file() {
  if (!trace_enabled()) return "";
  Recorder& r = recorder();
  std::lock_guard lk(r.m);
  return r.path.empty() ? "" : file_for(r.path, trace_rank());
}

// The steady clock's own epoch (boot, for Linux's CLOCK_MONOTONIC) rather than the process's
// start: every process on a host reads the same clock, so the ranks' files line up in Perfetto.
double trace_now_us() {
  return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
}

void trace_complete(const std::string& name, const std::string& category, double start_us, double end_us, int tid) {
  if (!trace_enabled()) return;
  record(Event{name, category, 'X', start_us, end_us > start_us ? end_us - start_us : 0.0, tid});
}

void trace_instant(const std::string& name, const std::string& category, int tid, double ts_us) {
  if (!trace_enabled()) return;
  record(Event{name, category, 'i', ts_us < 0 ? trace_now_us() : ts_us, 0.0, tid});
}

std::string trace_flush() {
  if (!trace_enabled()) return "";
  Recorder& r = recorder();
  std::lock_guard lk(r.m);
  if (r.path.empty()) return "";
  const int rank = trace_rank();
  std::string file = file_for(r.path, rank);
  // Written atomically (a temp file beside it, renamed), so a reader never sees half a file.
  {
    std::ostringstream os;
    os << "{\"traceEvents\":[\n";
    // Metadata: Perfetto shows "rank r" with named threads instead of bare numbers.
    os << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":0,\"args\":{\"name\":\"rank " << rank
       << "\"}},\n";
    os << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << kTraceComputeTid
       << ",\"args\":{\"name\":\"compute\"}},\n";
    os << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << kTraceCommTid
       << ",\"args\":{\"name\":\"communication\"}}";
    // Other threads (data-loader workers ...) that ran profiled ops: named by their tid.
    std::set<int> others;
    for (const Event& e : r.events)
      if (e.tid != kTraceComputeTid && e.tid != kTraceCommTid) others.insert(e.tid);
    for (int tid : others)
      os << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << tid
         << ",\"args\":{\"name\":\"thread " << tid << "\"}}";
    char num[64];
    for (const Event& e : r.events) {
      os << ",\n{\"name\":";
      write_json_string(os, e.name);
      os << ",\"cat\":";
      write_json_string(os, e.category);
      os << ",\"ph\":\"" << e.ph << "\"";
      std::snprintf(num, sizeof num, "%.3f", e.ts);
      os << ",\"ts\":" << num;
      if (e.ph == 'X') {
        std::snprintf(num, sizeof num, "%.3f", e.dur);
        os << ",\"dur\":" << num;
      } else {
        os << ",\"s\":\"t\"";
      }
      os << ",\"pid\":" << rank << ",\"tid\":" << e.tid << "}";
    }
    os << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"brisk BRISK_TRACE\",\"dropped_events\":"
       << r.dropped << "}}\n";
    io::write_file_atomic(file, os.str(), "trace_flush (BRISK_TRACE)");
  }
  return file;
}

TraceSpan::TraceSpan(std::string name, std::string category, int tid)
    : name_(std::move(name)), category_(std::move(category)), tid_(tid) {
  if (trace_enabled()) start_us_ = trace_now_us();
}

TraceSpan::~TraceSpan() {
  if (start_us_ >= 0) trace_complete(name_, category_, start_us_, trace_now_us(), tid_);
}

}  // namespace brisk
