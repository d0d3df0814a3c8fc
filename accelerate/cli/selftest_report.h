// The report each brisk-selftest rank writes for `brisk test` to combine: launch facts, the
// environment it saw, and its own checks. One "key<TAB>value..." line per item.
#pragma once
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace brisk::selftest {

enum class Status { Pass, Fail, Skip };
inline const char* status_name(Status s) {
  return s == Status::Pass ? "PASS" : s == Status::Fail ? "FAIL" : "SKIP";
}

struct CheckRow {
  Status status = Status::Fail;
  std::string name, detail;
};

struct RankReport {
  int pid = 0;
  std::string host;
  bool launcher_vars = false;  // OMPI_COMM_WORLD_* were present
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::vector<std::pair<std::string, std::string>> env;  // BRISK_*, OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES
  std::vector<CheckRow> checks;

  const std::string* env_value(const std::string& name) const {
    for (const auto& [k, v] : env)
      if (k == name) return &v;
    return nullptr;
  }
};

inline std::string to_text(const RankReport& r) {
  std::ostringstream o;
  o << "pid\t" << r.pid << "\nhost\t" << r.host << "\nlauncher_vars\t" << r.launcher_vars << "\nrank\t" << r.rank
    << "\nsize\t" << r.size << "\nlocal_rank\t" << r.local_rank << "\nlocal_size\t" << r.local_size << "\n";
  for (const auto& [k, v] : r.env) o << "env\t" << k << "\t" << v << "\n";
  for (const CheckRow& c : r.checks)
    o << "check\t" << status_name(c.status) << "\t" << c.name << "\t" << c.detail << "\n";
  return o.str();
}

inline RankReport parse_report(const std::string& text) {
  RankReport r;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string part; std::getline(ls, part, '\t');) f.push_back(part);
    if (f.size() < 2) continue;
    auto num = [&] { return std::atoi(f[1].c_str()); };
    if (f[0] == "pid")
      r.pid = num();
    else if (f[0] == "host")
      r.host = f[1];
    else if (f[0] == "launcher_vars")
      r.launcher_vars = num() != 0;
    else if (f[0] == "rank")
      r.rank = num();
    else if (f[0] == "size")
      r.size = num();
    else if (f[0] == "local_rank")
      r.local_rank = num();
    else if (f[0] == "local_size")
      r.local_size = num();
    else if (f[0] == "env" && f.size() >= 3)
      r.env.emplace_back(f[1], f[2]);
    else if (f[0] == "check" && f.size() >= 3) {
      Status s = f[1] == "PASS" ? Status::Pass : f[1] == "SKIP" ? Status::Skip : Status::Fail;
      r.checks.push_back({s, f[2], f.size() >= 4 ? f[3] : ""});
    }
  }
  return r;
}

}  // namespace brisk::selftest
