// TEMP stub of helper R's BRISK_TRACE writer (dist::trace_span / trace_instant / trace_flush):
// every call is a no-op until the real one lands.
#pragma once
#include <string>

namespace brisk::dist {

class TraceSpan {
 public:
  TraceSpan() {}
  ~TraceSpan() {}  // user-provided: a span held only for its scope is not an unused variable
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
};
inline TraceSpan trace_span(const std::string&, const std::string& = "") { return {}; }
inline void trace_instant(const std::string&, const std::string& = "") {}
inline void trace_flush() {}

}  // namespace brisk::dist
