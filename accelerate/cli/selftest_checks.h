// The checks brisk-selftest runs in every process of `brisk test`. Add a check by appending to
// self_checks(): it runs on every rank, and `brisk test` shows PASS only when every rank passed.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "selftest_report.h"

namespace brisk::selftest {

// This process's place in the job, from the launcher's environment.
struct RankInfo {
  bool launcher_vars = false;  // OMPI_COMM_WORLD_* present (false for `brisk launch -n 1`)
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string problem;  // set when the variables are present but unreadable or inconsistent
};
RankInfo read_rank_info();

struct CheckResult {
  Status status;
  std::string detail;  // one line: what was compared, or why it was skipped
};

struct SelfCheck {
  std::string name;
  std::function<CheckResult(const RankInfo&)> run;  // may throw: reported as FAIL with the message
};

std::vector<SelfCheck> self_checks();

}  // namespace brisk::selftest
