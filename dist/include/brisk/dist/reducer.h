// TEMP stub of helper R's Reducer (same interface as ISSUE5.md), so the Accelerator builds and
// its tests run before the real one lands: no buckets, every gradient all-reduced at finalize.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "brisk/core/tensor.h"
#include "brisk/dist/process_group.h"

namespace brisk::dist {

struct ReducerOptions {
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool find_unused_parameters = false;
  Algorithm algorithm = Algorithm::Default;
};
struct BucketInfo {
  std::vector<size_t> params;
  size_t bytes;
};

class Reducer {
 public:
  Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& pg, ReducerOptions o = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;
  void set_sync(bool sync);
  bool sync() const;
  void finalize();
  const std::vector<BucketInfo>& buckets() const;
  struct Event {
    size_t bucket;
    double start_us, end_us;
  };
  const std::vector<Event>& last_step_events() const;

 private:
  struct State;
  static void finalize_state(State& s);
  std::shared_ptr<State> s_;
};

}  // namespace brisk::dist
