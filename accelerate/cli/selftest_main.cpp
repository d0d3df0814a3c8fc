// brisk-selftest: the program `brisk test` launches on N processes. Each rank runs the checks in
// selftest_checks.cpp and writes its report into --report_dir; it can also fail on purpose
// (--fail_rank) so `brisk test` can see that a failing rank stops the job and sets its exit status.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "brisk/util/cli.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"
#include "selftest_checks.h"

using namespace brisk::selftest;

namespace {

// Writes the file atomically; on failure prints why (the path and the system's reason) and returns false.
bool write_atomically(const std::string& path, const std::string& text) {
  try {
    brisk::io::write_file_atomic(path, text, "brisk-selftest");
    return true;
  } catch (const brisk::Error& e) {
    std::fprintf(stderr, "%s\n", e.message().c_str());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  brisk::cli::Parser p("brisk-selftest",
                       "One rank of `brisk test`: checks the launch environment and the library, writes a report.");
  std::string report_dir;
  int fail_rank = -1, fail_code = 3;
  double survivor_wait = 0;
  p.add("report_dir", "folder for this rank's report (default: print it)", &report_dir);
  p.add("fail_rank", "this rank exits with --fail_code after reporting (-1: none)", &fail_rank);
  p.add("fail_code", "exit status of the failing rank", &fail_code);
  p.add("survivor_wait", "seconds the other ranks then wait before exiting normally", &survivor_wait);
  if (!p.parse(argc, argv)) return p.exit_code();

  RankInfo info = read_rank_info();
  RankReport report;
  report.pid = static_cast<int>(::getpid());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  report.host = host;
  report.launcher_vars = info.launcher_vars;
  report.rank = info.rank;
  report.size = info.size;
  report.local_rank = info.local_rank;
  report.local_size = info.local_size;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    std::string k = kv.substr(0, eq);
    if (eq != std::string::npos && (k.rfind("BRISK_", 0) == 0 || k == "OMP_NUM_THREADS" || k == "CUDA_VISIBLE_DEVICES"))
      report.env.emplace_back(k, kv.substr(eq + 1));
  }
  for (const SelfCheck& c : self_checks()) {
    CheckResult r{Status::Fail, ""};
    try {
      r = c.run(info);
    } catch (const std::exception& e) {
      r = {Status::Fail, std::string("threw: ") + e.what()};
    }
    for (char& ch : r.detail)
      if (ch == '\t' || ch == '\n') ch = ' ';
    report.checks.push_back({r.status, c.name, r.detail});
  }

  std::string text = to_text(report);
  if (report_dir.empty()) {
    std::fputs(text.c_str(), stdout);
  } else if (!write_atomically(report_dir + "/report-" + std::to_string(report.pid) + ".txt", text)) {
    return 1;
  }
  if (fail_rank >= 0) {
    if (info.rank == fail_rank) return fail_code;
    // A survivor: `brisk test` expects the launcher to stop us long before this wait ends.
    std::this_thread::sleep_for(std::chrono::duration<double>(survivor_wait));
    if (!report_dir.empty()) write_atomically(report_dir + "/survived-" + std::to_string(report.pid) + ".txt", "");
  }
  bool failed = false;
  for (const CheckRow& c : report.checks) failed |= c.status == Status::Fail;
  return failed ? 1 : 0;
}
