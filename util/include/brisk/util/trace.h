// BRISK_TRACE: a tiny Chrome-trace recorder. With BRISK_TRACE=<path> in the environment every
// process keeps its spans in memory and writes them as Chrome trace JSON, one file per rank,
// at exit or on trace_flush(); chrome://tracing and https://ui.perfetto.dev open the files.
//
//   { TraceSpan span("forward", "compute");  model.forward(x); }   // one "X" event
//   trace_instant("epoch", "train");
//   trace_flush();                                                   // write now
//
// File: `<path>.rank<r>.json` (a trailing ".json" on <path> is dropped first, so
// BRISK_TRACE=run.json gives run.rank0.json, run.rank1.json ...). Events are
// {"name","cat","ph":"X","ts","dur","pid":rank,"tid"} with times in microseconds of the steady
// clock (CLOCK_MONOTONIC on Linux: one clock for all processes of a host, so the ranks' files
// line up when Perfetto opens them together). tid 0 is computation (kTraceComputeTid), tid 1
// the communication thread (kTraceCommTid). The Reducer records "launch bucket k" instants on
// tid 0 (from the gradient hook that launched it) and "all_reduce bucket k" spans on tid 1
// (while the communication thread worked on it), and a "reducer finalize" span on tid 0.
// With the profiler on as well (BRISK_PROFILE, brisk/core/profiler.h), every profiled scope (the
// ops, their backward nodes, optimizer steps, data loading) is an "X" event of category "op" on
// the thread that ran it: tid 0 for the main thread, 2, 3, ... for other threads.
// Disabled (the default), every call costs one relaxed atomic load.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brisk {

inline constexpr int kTraceComputeTid = 0;
inline constexpr int kTraceCommTid = 1;

// True when spans are being recorded (BRISK_TRACE set, or trace_set_path with a path).
bool trace_enabled();
// Overrides BRISK_TRACE: starts recording to `path` (as if BRISK_TRACE=path); "" stops
// recording and forgets the recorded events.
void trace_set_path(const std::string& path);
// The process's rank, for the file name and the trace's pid: dist installs a source that reads
// the launcher's variables (brisk launch, mpirun, srun); without one the rank is 0.
using TraceRankSource = int (*)();
void trace_set_rank_source(TraceRankSource source);
// The file this process writes (empty when disabled): `<path>.rank<rank>.json`.
std::string trace_file();
// Microseconds on the steady clock (since boot on Linux). Everything that timestamps spans
// (the Reducer's events too) uses this clock.
double trace_now_us();

// Records one complete span ("ph":"X"). Thread-safe. A no-op when disabled.
void trace_complete(const std::string& name, const std::string& category, double start_us, double end_us,
                    int tid = kTraceComputeTid);
// Records an instant event ("ph":"i") at ts_us (now when negative). A no-op when disabled.
void trace_instant(const std::string& name, const std::string& category, int tid = kTraceComputeTid, double ts_us = -1);

// Writes every event recorded so far to trace_file() (the whole file, replacing the last
// flush); also runs at exit. Returns the path written, or "" when disabled.
std::string trace_flush();

// An RAII span: records [construction, destruction) on `tid` when tracing is enabled.
class TraceSpan {
 public:
  TraceSpan(std::string name, std::string category, int tid = kTraceComputeTid);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  std::string name_, category_;
  int tid_;
  double start_us_ = -1;  // < 0: tracing was off at construction
};
// `auto s = trace_span("backward", "compute");` reads as well.
using trace_span = TraceSpan;

}  // namespace brisk
