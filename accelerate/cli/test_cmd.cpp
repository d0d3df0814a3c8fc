// `brisk test`: launches brisk-selftest on N processes through `brisk launch`, combines the
// ranks' reports, launches it again with one rank failing on purpose, and prints a pass/fail table.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "brisk/accelerate/config.h"
#include "brisk/accelerate/host.h"
#include "brisk/util/cli.h"
#include "brisk/util/error.h"
#include "commands.h"
#include "selftest_report.h"

namespace brisk::cli_commands {

using namespace brisk::accelerate;
using selftest::CheckRow;
using selftest::RankReport;
using selftest::Status;

namespace fs = std::filesystem;

namespace {

struct RunResult {
  int exit_code = -1;  // the launcher's exit status (128 + signal when killed)
  double seconds = 0;
  bool timed_out = false;
  std::string log;  // everything the launch printed
};

// Runs `brisk launch ARGS` as a child in its own process group, output to `log_path`.
RunResult run_launch(const std::vector<std::string>& args, const std::string& log_path, double timeout) {
  RunResult r;
  auto start = std::chrono::steady_clock::now();
  std::string self = (fs::path(executable_dir()) / "brisk").string();
  pid_t pid = ::fork();
  if (pid < 0) {
    r.log = std::string("fork failed: ") + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    std::vector<char*> argv{const_cast<char*>(self.c_str()), const_cast<char*>("launch")};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(self.c_str(), argv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", self.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > timeout && !r.timed_out) {
      r.timed_out = true;
      ::kill(-pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(2));
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.log = ss.str();
  return r;
}

std::vector<RankReport> read_reports(const std::string& dir, int& survivors) {
  std::vector<RankReport> out;
  survivors = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("survived-", 0) == 0 && e.path().extension() == ".txt") ++survivors;
    if (name.rfind("report-", 0) != 0 || e.path().extension() != ".txt") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(selftest::parse_report(ss.str()));
  }
  std::sort(out.begin(), out.end(), [](const RankReport& a, const RankReport& b) { return a.rank < b.rank; });
  return out;
}

std::string tail_lines(const std::string& text, int n) {
  size_t pos = text.size();
  for (int i = 0; i <= n; ++i) {
    if (pos == 0) return text;
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

std::string random_token() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// One `brisk test`: the launches' common arguments, the self-test program, its work folder and
// the token the launcher must forward to every rank.
struct SelfTestJob {
  int n = 2;
  double timeout = 120;
  std::vector<std::string> common;  // -n N [--config_file F]
  std::string selftest, work, token;
};

using Rows = std::vector<CheckRow>;

// What the ranks' reports say about the job: the world size, distinct ranks and local ranks, and
// the variables the launcher forwards.
void check_job_facts(const std::vector<RankReport>& reports, const SelfTestJob& job, Rows& rows) {
  std::set<int> ranks;
  bool sizes = true;
  for (const RankReport& r : reports) {
    ranks.insert(r.rank);
    sizes &= r.size == job.n;
  }
  rows.push_back({sizes ? Status::Pass : Status::Fail, "world size agrees",
                  sizes ? "every rank sees " + std::to_string(job.n) : "ranks disagree on the world size"});
  bool distinct = static_cast<int>(ranks.size()) == static_cast<int>(reports.size()) && *ranks.begin() == 0 &&
                  *ranks.rbegin() == static_cast<int>(reports.size()) - 1;
  rows.push_back({distinct ? Status::Pass : Status::Fail, "ranks distinct",
                  distinct ? "0.." + std::to_string(reports.size() - 1) : "ranks repeat or leave gaps"});
  std::map<std::string, std::pair<std::set<int>, int>> per_host;  // host -> (local ranks, reports)
  bool local_ok = true;
  for (const RankReport& r : reports) {
    auto& [locals, count] = per_host[r.host];
    locals.insert(r.local_rank);
    ++count;
  }
  for (const RankReport& r : reports) {
    const auto& [locals, count] = per_host[r.host];
    local_ok &= static_cast<int>(locals.size()) == count && r.local_size == count;
  }
  rows.push_back({local_ok ? Status::Pass : Status::Fail, "local ranks distinct",
                  std::to_string(per_host.size()) + " host" + (per_host.size() == 1 ? "" : "s")});
  bool forwarded = true;
  for (const RankReport& r : reports) {
    const std::string* t = r.env_value("BRISK_SELFTEST_TOKEN");
    const std::string* l = r.env_value("BRISK_LAUNCHED");
    forwarded &= t && *t == job.token && l && *l == "1";
  }
  rows.push_back({forwarded ? Status::Pass : Status::Fail, "BRISK_* variables forwarded",
                  forwarded ? "BRISK_LAUNCHED and the launcher's BRISK_SELFTEST_TOKEN seen by every rank"
                            : "a rank misses BRISK_LAUNCHED=1 or the launcher's BRISK_SELFTEST_TOKEN"});
}

// Each per-rank check of the reports: FAIL if any rank failed, SKIP if any skipped, else PASS.
void combine_rank_checks(const std::vector<RankReport>& reports, Rows& rows) {
  for (size_t i = 0; i < reports[0].checks.size(); ++i) {
    const CheckRow& first = reports[0].checks[i];
    Status s = Status::Pass;
    std::string detail = first.detail;
    for (const RankReport& r : reports) {
      const CheckRow* c = nullptr;
      for (const CheckRow& x : r.checks)
        if (x.name == first.name) c = &x;
      if (!c || c->status == Status::Fail) {
        s = Status::Fail;
        detail = "rank " + std::to_string(r.rank) + ": " + (c ? c->detail : "check missing");
        break;
      }
      if (c->status == Status::Skip) s = Status::Skip;
    }
    if (s == Status::Pass && reports.size() > 1) detail.insert(0, "every rank; rank 0: ");
    rows.push_back({s, first.name, detail});
  }
}

// 1. A normal run: every rank reports, and the reports agree.
void normal_run(const SelfTestJob& job, Rows& rows, std::string& failure_log) {
  std::vector<std::string> args = job.common;
  args.insert(args.end(), {job.selftest, "--report_dir", job.work + "/run"});
  RunResult run = run_launch(args, job.work + "/run.log", job.timeout);
  int survivors = 0;
  std::vector<RankReport> reports = read_reports(job.work + "/run", survivors);
  bool started = static_cast<int>(reports.size()) == job.n && !run.timed_out;
  rows.push_back({started ? Status::Pass : Status::Fail, "processes started",
                  std::to_string(reports.size()) + " of " + std::to_string(job.n) + " reported" +
                      (run.timed_out ? ", killed after " + std::to_string(static_cast<int>(job.timeout)) + " s" : "") +
                      ", launch exit " + std::to_string(run.exit_code)});
  if (!started || run.exit_code != 0)
    failure_log += "--- brisk launch (normal run) printed:\n" + tail_lines(run.log, 30);
  if (reports.empty()) return;
  check_job_facts(reports, job, rows);
  combine_rank_checks(reports, rows);
}

// 2. The last rank exits with status 3 at once; the others would sleep 45 s. The launcher must
// return 3 and stop the others well before.
void failing_run(const SelfTestJob& job, Rows& rows, std::string& failure_log) {
  const int n = job.n;
  std::vector<std::string> args = job.common;
  args.insert(args.end(), {job.selftest, "--report_dir", job.work + "/fail", "--fail_rank", std::to_string(n - 1),
                           "--fail_code", "3", "--survivor_wait", "45"});
  RunResult bad = run_launch(args, job.work + "/fail.log", std::min(job.timeout, 60.0));
  int bad_survivors = 0;
  size_t bad_reports = read_reports(job.work + "/fail", bad_survivors).size();
  rows.push_back({bad.exit_code == 3 ? Status::Pass : Status::Fail, "exit status forwarded",
                  "rank " + std::to_string(n - 1) + " exited 3, launch exited " + std::to_string(bad.exit_code)});
  if (n < 2) {
    rows.push_back({Status::Skip, "a failing rank stops the others", "needs 2 or more processes"});
  } else {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", bad.seconds);
    // Only meaningful when every rank started and the failing one failed as planned.
    bool started_all = static_cast<int>(bad_reports) == n && bad.exit_code == 3;
    bool stopped = started_all && !bad.timed_out && bad.seconds < 30 && bad_survivors == 0;
    rows.push_back({stopped ? Status::Pass : Status::Fail, "a failing rank stops the others",
                    !started_all ? std::to_string(bad_reports) + " of " + std::to_string(n) +
                                       " ranks started, launch exited " + std::to_string(bad.exit_code)
                                 : std::string("job ended after ") + secs + " s" +
                                       (bad_survivors ? ", " + std::to_string(bad_survivors) + " ranks ran on" : "")});
  }
  if (bad.exit_code != 3) failure_log += "--- brisk launch (failing run) printed:\n" + tail_lines(bad.log, 30);
}

// The pass/fail table and the counts; returns the number of failed checks.
int print_table(const Rows& rows, const std::string& failure_log) {
  size_t w = 5;
  for (const CheckRow& r : rows) w = std::max(w, r.name.size());
  int counts[3] = {0, 0, 0};
  std::printf("\n| %-*s | result | detail\n|%s|--------|--------\n", static_cast<int>(w), "check",
              std::string(w + 2, '-').c_str());
  for (const CheckRow& r : rows) {
    ++counts[static_cast<int>(r.status)];
    std::printf("| %-*s | %-6s | %s\n", static_cast<int>(w), r.name.c_str(), selftest::status_name(r.status),
                r.detail.c_str());
  }
  std::printf("\n%d passed, %d failed, %d skipped (not checkable in this build)\n", counts[0], counts[1], counts[2]);
  if (counts[1] > 0 && !failure_log.empty()) std::printf("\n%s", failure_log.c_str());
  return counts[1];
}

}  // namespace

int test(int argc, char** argv) {
  const std::string me = argv[0];
  cli::Parser p(me,
                "Launches brisk-selftest on N processes with `brisk launch`, checks what every rank saw,\n"
                "then makes one rank fail to check that the job stops and reports its exit status.\n"
                "Prints a pass/fail table; exits 0 when nothing failed (SKIP rows are checks this build\n"
                "cannot run yet).");
  int num_processes = 2;
  std::string config_file;
  double timeout = 120;
  bool keep = false;
  p.add("num_processes", "processes to launch (default: the config's num_processes, else 2)", &num_processes, 'n');
  p.add("config_file", "config for the launches (default: " + default_config_hint() + ")", &config_file);
  p.add("timeout", "seconds each launch may take before it is killed", &timeout);
  p.add("keep", "keep the folder with the ranks' reports and logs", &keep);
  if (!p.parse(argc, argv)) return p.exit_code();

  Config cfg;
  std::string cfg_path;
  try {
    cfg_path = read_config(config_file, cfg);
  } catch (const brisk::Error& e) {
    return fail(me, e.message());
  }
  SelfTestJob job;
  job.timeout = timeout;
  job.n = p.given("num_processes") ? num_processes : cfg.num_processes.value_or(2);
  if (job.n < 1) return fail(me, "--num_processes must be at least 1, got " + std::to_string(job.n));
  job.selftest = (fs::path(executable_dir()) / "brisk-selftest").string();
  if (::access(job.selftest.c_str(), X_OK) != 0)
    return fail(me, "brisk-selftest not found next to brisk (" + job.selftest +
                        "); reinstall brisk, or build the brisk-selftest target");

  char tmpl[] = "/tmp/brisk-test-XXXXXX";
  if (!::mkdtemp(tmpl)) return fail(me, std::string("cannot make a temporary folder: ") + std::strerror(errno));
  job.work = tmpl;
  fs::create_directories(job.work + "/run");
  fs::create_directories(job.work + "/fail");
  job.token = random_token();
  ::setenv("BRISK_SELFTEST_TOKEN", job.token.c_str(), 1);

  job.common = {"-n", std::to_string(job.n)};
  if (!config_file.empty()) job.common.insert(job.common.end(), {"--config_file", config_file});
  std::printf("brisk test: %d process%s, config %s\n", job.n, job.n == 1 ? "" : "es",
              cfg_path.empty() ? "none" : cfg_path.c_str());
  std::fflush(stdout);

  Rows rows;
  std::string failure_log;
  normal_run(job, rows, failure_log);
  failing_run(job, rows, failure_log);
  const int failed = print_table(rows, failure_log);
  if (keep || failed > 0) {
    std::printf("reports and logs kept in %s\n", job.work.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(job.work, ec);
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace brisk::cli_commands
