// brisk_test_job: the one way CTest runs a program that is more than a single process (mpirun
// jobs, `brisk launch`, examples, scripts), and the programs whose output it checks. It judges a
// job by everything that can go wrong with one:
//   - the command's exit status, and every rank's own exit status (each rank runs through
//     `brisk_test_job --rank`, which records it), so a rank that failed is seen even when the
//     launcher exits 0 or another rank printed the success line;
//   - the time limit: past it the whole job (its session, its process groups, everything that
//     carries its token, every orphan it left) gets SIGTERM, then SIGKILL, and the test fails;
//   - on a time-out, each process's thread stacks (gdb, when installed) go into the report;
//   - processes left behind: when the command has exited, nothing of the job may be alive
//     (found by session id, by an environment token that children inherit even when they
//     start their own session, and as orphans re-parented to this program, a subreaper);
//   - optionally, what the output must (--grep) or must not (--reject) contain: in addition to
//     the exit statuses, never instead of them.
//
// usage: brisk_test_job [OPTIONS] -- PROGRAM [ARGS...]
//   --np N            run PROGRAM as N ranks under mpirun ($MPIEXEC, else mpirun) with the options
//                     every brisk test uses (oversubscribed, unbound, yielding, TCP on loopback,
//                     one OpenMP thread), each rank through `brisk_test_job --rank`
//   --ranks N         the command starts N ranks itself (`brisk launch -n N brisk_test_job --rank
//                     -- PROGRAM ...`): exactly N must report, each with status 0
//   --expect pass|fail  pass (default): the command and every rank exit 0. fail: the command
//                     exits non-zero (how a job that must fail is checked)
//   --exit-code N     the command must exit with exactly N
//   --timeout S       the job's time limit in seconds (default 60)
//   --grep REGEX      the output (stdout and stderr) must match (POSIX extended regex; '.' matches
//                     newlines, as in CTest's PASS_REGULAR_EXPRESSION)
//   --reject REGEX    the output must not match
//   --env K=V         set in the job's environment (and forwarded to the ranks under --np)
//   --mpirun-arg ARG  one more mpirun option (with --np)
//   --skip-code N     the command exiting with N means "skipped": this program exits N too
//                     (CTest's SKIP_RETURN_CODE), once nothing of the job is left
// internal: brisk_test_job --rank -- PROGRAM [ARGS...]   one rank (see above)
//
// Exits 0 when the job passed, 1 when it failed (saying why on the last lines), 2 on bad usage.
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "brisk_test_job: %s\nusage: brisk_test_job [OPTIONS] -- PROGRAM [ARGS...] (see the source)\n",
               why.c_str());
  std::exit(2);
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

long parse_long(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || errno || *end || x < lo || x > hi)
    usage(flag + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return x;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// --- one rank ------------------------------------------------------------------------------------

pid_t g_child = -1;

void forward_signal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// Runs the rank's program as a child (which dies with us: PR_SET_PDEATHSIG), passes on every
// signal a launcher sends, records how the program ended in $BRISK_TEST_JOB_DIR/rank.<R> and
// ends the same way.
int run_rank(char** argv) {
  const char* rank_env = nullptr;
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if ((rank_env = std::getenv(name))) break;
  const std::string rank = rank_env ? rank_env : "0";
  const char* dir = std::getenv("BRISK_TEST_JOB_DIR");
  const pid_t parent = getpid();
  g_child = fork();
  if (g_child < 0) {
    std::perror("brisk_test_job --rank: fork");
    return 1;
  }
  if (g_child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the rank wrapper died already
    execvp(argv[0], argv);
    std::fprintf(stderr, "brisk_test_job --rank: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT}) sigaction(sig, &sa, nullptr);
  int status = 0;
  while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {
  }
  if (dir) {
    // O_EXCL: two processes claiming the same rank is itself a failure the runner reports.
    std::string path = std::string(dir) + "/rank." + rank;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) fd = open((path + ".duplicate." + std::to_string(getpid())).c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
      const std::string text = describe_status(status) + "\n";
      if (write(fd, text.data(), text.size()) < 0) std::perror("brisk_test_job --rank: write");
      close(fd);
    }
  }
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    raise(WTERMSIG(status));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// --- the job's processes -------------------------------------------------------------------------

struct ProcInfo {
  pid_t pid;
  std::string cmdline;
};

// The job's own process (the launcher, or the command itself). This program is a subreaper and
// reaps orphans with waitpid(-1), which can just as well reap the job's process, so every wait
// goes through reap() and whichever reaps it records its status here. (When only `waitpid(job)`
// looked for it, an exit that fell between that poll and the orphan sweep lost the status, and
// the runner waited for a process that was already gone until the time limit: "killed it
// (0 process(es))".)
struct JobEnd {
  pid_t pid = -1;
  bool ended = false;
  int status = 0;
} g_job;

// waitpid(pid, options), recording the job's status when it is the process reaped.
pid_t reap(pid_t pid, int options) {
  int status = 0;
  const pid_t reaped = waitpid(pid, &status, options);
  if (reaped > 0 && reaped == g_job.pid) {
    g_job.ended = true;
    g_job.status = status;
  }
  return reaped;
}

// /proc/PID/stat fields after the command name: state, ppid, pgrp, session.
bool stat_of(pid_t pid, char& state, pid_t& ppid, pid_t& session) {
  std::string s = read_all("/proc/" + std::to_string(pid) + "/stat");
  size_t close_paren = s.rfind(')');
  if (close_paren == std::string::npos) return false;
  std::istringstream is(s.substr(close_paren + 2));
  long pp = 0, pg = 0, sid = 0;
  is >> state >> pp >> pg >> sid;
  ppid = static_cast<pid_t>(pp);
  session = static_cast<pid_t>(sid);
  return static_cast<bool>(is);
}

// Every live process of the job other than this program: in its session, carrying its token,
// or an orphan of it re-parented here. Zombies are reaped (ours) or skipped.
std::vector<ProcInfo> job_processes(pid_t session, const std::string& token) {
  std::vector<ProcInfo> found;
  const pid_t self = getpid();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == self) continue;
    char state = '?';
    pid_t ppid = 0, sid = 0;
    if (!stat_of(pid, state, ppid, sid)) continue;
    if (state == 'Z' || state == 'X') {
      if (ppid == self) reap(pid, WNOHANG);
      continue;
    }
    bool mine = sid == session || ppid == self;
    if (!mine) {
      std::string env = read_all("/proc/" + name + "/environ");
      mine = env.find(token + "=1") != std::string::npos;
    }
    if (!mine) continue;
    std::string cmd = read_all("/proc/" + name + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    found.push_back({pid, cmd});
  }
  return found;
}

void signal_all(const std::vector<ProcInfo>& ps, int sig) {
  for (const auto& p : ps) kill(p.pid, sig);
}

void reap_children() {
  while (reap(-1, WNOHANG) > 0) {
  }
}

// Waits up to `seconds` for the job to be gone; returns what is still there.
std::vector<ProcInfo> wait_gone(pid_t session, const std::string& token, double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    reap_children();
    auto left = job_processes(session, token);
    if (left.empty() || Clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Each process's threads and their stacks, from gdb when it is installed (a time-out is then
// diagnosable from the test's log alone): the frame lines of `thread apply all bt`, at most 60 per
// process, gdb itself limited to 30 s; launchers, rank wrappers and shells are left out. BRISK_TEST_JOB_STACKS=0 turns
// it off.
std::string stacks_of(const std::vector<ProcInfo>& ps) {
  const char* flag = std::getenv("BRISK_TEST_JOB_STACKS");
  if ((flag && std::strcmp(flag, "0") == 0) || std::system("command -v gdb >/dev/null 2>&1") != 0) return {};
  std::ostringstream os;
  for (const auto& p : ps) {
    // The programs themselves: not the launcher, the rank wrappers or the scripts around them.
    bool wrapper = false;
    for (const char* w : {"gdb ", "timeout ", "mpirun ", "mpiexec ", "bash ", "sh "})
      wrapper |= p.cmdline.rfind(w, 0) == 0;
    if (wrapper || p.cmdline.find("brisk_test_job") != std::string::npos) continue;
    const std::string cmd = "timeout 30 gdb -p " + std::to_string(p.pid) +
                            " -batch -nx -ex 'thread apply all bt 25' 2>/dev/null | grep -E '^(Thread|#)' | head -60";
    os << "\n--- stacks of " << p.pid << " " << p.cmdline << "\n";
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char line[512];
      while (std::fgets(line, sizeof line, f)) os << "  " << line;
      pclose(f);
    }
  }
  return os.str();
}

// SIGTERM to everything of the job, SIGKILL to what survives 3 s; returns what had to be killed.
std::vector<ProcInfo> kill_job(pid_t session, const std::string& token) {
  kill(-session, SIGTERM);
  auto ps = job_processes(session, token);
  signal_all(ps, SIGTERM);
  auto left = wait_gone(session, token, 3);
  for (int round = 0; round < 10 && !left.empty(); ++round) {
    kill(-session, SIGKILL);
    signal_all(left, SIGKILL);
    left = wait_gone(session, token, 0.5);
  }
  return ps;
}

bool matches(const std::string& text, const std::string& pattern, bool& bad_pattern) {
  regex_t re;
  if (regcomp(&re, pattern.c_str(), REG_EXTENDED | REG_NOSUB) != 0) {
    bad_pattern = true;
    return false;
  }
  bool ok = regexec(&re, text.c_str(), 0, nullptr, 0) == 0;
  regfree(&re);
  return ok;
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream os;
  os << "BRISK_TEST_JOB_" << getpid() << "_" << std::hex << rd() << rd();
  return os.str();
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  if (i < argc && std::strcmp(argv[i], "--rank") == 0) {
    ++i;
    if (i < argc && std::strcmp(argv[i], "--") == 0) ++i;
    if (i >= argc) usage("--rank needs a program");
    return run_rank(argv + i);
  }
  long np = 0, ranks = -1, timeout = 60, exit_code = -1, skip_code = -1;
  std::string expect = "pass";
  std::vector<std::string> greps, rejects, envs, mpirun_args;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--np") {
      np = parse_long(a, value(), 1, 64);
    } else if (a == "--ranks") {
      ranks = parse_long(a, value(), 1, 64);
    } else if (a == "--expect") {
      expect = value();
      if (expect != "pass" && expect != "fail") usage("--expect: pass or fail, got '" + expect + "'");
    } else if (a == "--exit-code") {
      exit_code = parse_long(a, value(), 0, 255);
    } else if (a == "--timeout") {
      timeout = parse_long(a, value(), 1, 3600);
    } else if (a == "--grep") {
      greps.push_back(value());
    } else if (a == "--reject") {
      rejects.push_back(value());
    } else if (a == "--env") {
      envs.push_back(value());
      if (envs.back().find('=') == std::string::npos) usage("--env: expected K=V, got '" + envs.back() + "'");
    } else if (a == "--skip-code") {
      skip_code = parse_long(a, value(), 1, 255);
    } else if (a == "--mpirun-arg") {
      mpirun_args.push_back(value());
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (i >= argc) usage("no command after the options (put it after --)");
  if (np > 0 && ranks > 0 && ranks != np) usage("--ranks differs from --np");
  if (np > 0) ranks = np;

  // The command line: as given, or mpirun with every rank through --rank.
  std::vector<std::string> cmd;
  if (np > 0) {
    const char* mpiexec = std::getenv("MPIEXEC");
    cmd = {mpiexec && *mpiexec ? mpiexec : "mpirun",
           "-n",
           std::to_string(np),
           "--oversubscribe",
           "--bind-to",
           "none",
           "--mca",
           "mpi_yield_when_idle",
           "1",
           "--mca",
           "btl_tcp_if_include",
           "lo",
           "--mca",
           "oob_tcp_if_include",
           "lo",
           "-x",
           "OMP_NUM_THREADS=1",
           "-x",
           "BRISK_TEST_JOB_DIR"};
    if (getuid() == 0) cmd.emplace_back("--allow-run-as-root");
    for (const auto& e : envs) {
      cmd.emplace_back("-x");
      cmd.push_back(e.substr(0, e.find('=')));
    }
    for (const auto& m : mpirun_args) cmd.push_back(m);
    cmd.push_back(fs::canonical("/proc/self/exe").string());
    cmd.emplace_back("--rank");
    cmd.emplace_back("--");
  }
  for (; i < argc; ++i) cmd.emplace_back(argv[i]);

  const char* tmp = std::getenv("TMPDIR");
  std::string dir_pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/brisk_test_job_XXXXXX";
  if (!mkdtemp(dir_pattern.data())) {
    std::perror(("brisk_test_job: mkdtemp " + dir_pattern).c_str());
    return 1;
  }
  const std::string job_dir = dir_pattern;
  const std::string out_path = job_dir + "/output";
  const std::string token = random_token();

  // Orphans of the job become our children, so they can be found and reaped.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::fflush(stdout);
  const auto start = Clock::now();
  const pid_t child = fork();
  if (child < 0) {
    std::perror("brisk_test_job: fork");
    return 1;
  }
  if (child == 0) {
    setsid();  // its own session and process group: the whole job is findable and killable
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    int null = open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0) _exit(126);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv(token.c_str(), "1", 1);
    setenv("BRISK_TEST_JOB_DIR", job_dir.c_str(), 1);
    setenv("OMP_NUM_THREADS", "1", 0);
    for (const auto& e : envs) setenv(e.substr(0, e.find('=')).c_str(), e.substr(e.find('=') + 1).c_str(), 1);
    std::vector<char*> args;
    args.reserve(cmd.size() + 1);
    for (auto& c : cmd) args.push_back(c.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "brisk_test_job: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }

  g_job.pid = child;
  std::vector<std::string> failures;
  bool timed_out = false;
  const auto deadline = start + std::chrono::seconds(timeout);
  for (;;) {
    reap_children();  // the job's process included
    if (g_job.ended) break;
    if (Clock::now() >= deadline) {
      timed_out = true;
      const std::string stacks = stacks_of(job_processes(child, token));
      auto killed = kill_job(child, token);
      if (!g_job.ended) reap(child, 0);
      std::ostringstream os;
      os << "the job did not finish within its time limit of " << timeout << " s: killed it (" << killed.size()
         << " process(es))";
      for (const auto& p : killed) os << "\n  " << p.pid << " " << p.cmdline;
      os << stacks;
      failures.push_back(os.str());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const int status = g_job.status;

  // Nothing of the job may outlive it (a moment for ranks that are exiting).
  if (!timed_out) {
    auto left = wait_gone(child, token, 5);
    if (!left.empty()) {
      std::ostringstream os;
      os << left.size() << " process(es) of the job left behind after it ended (killed now):";
      for (const auto& p : left) os << "\n  " << p.pid << " " << p.cmdline;
      failures.push_back(os.str());
      kill_job(child, token);
    }
  }

  std::string output = read_all(out_path);
  std::fwrite(output.data(), 1, output.size(), stdout);
  for (char& c : output)
    if (c == '\0') c = ' ';

  const bool skipped = !timed_out && skip_code > 0 && WIFEXITED(status) && WEXITSTATUS(status) == skip_code;
  if (skipped) {
    // Only leftovers count against a skipped job.
  } else if (!timed_out) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (exit_code >= 0) {
      if (code != exit_code)
        failures.push_back("the command ended with " + describe_status(status) + ", expected exit " +
                           std::to_string(exit_code));
    } else if (expect == "pass" && status != 0) {
      failures.push_back("the command ended with " + describe_status(status));
    } else if (expect == "fail" && status == 0) {
      failures.emplace_back("the command exited 0 but this job must fail");
    }
  }
  // Every rank's own exit status.
  if (ranks > 0 && expect == "pass" && exit_code < 0 && !skipped) {
    std::map<long, std::string> seen;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(job_dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("rank.", 0) != 0) continue;
      if (name.find(".duplicate.") != std::string::npos) {
        failures.push_back("two processes reported as the same rank (" + name + ")");
        continue;
      }
      std::string text = read_all(e.path().string());
      while (!text.empty() && text.back() == '\n') text.pop_back();
      seen[std::strtol(name.c_str() + 5, nullptr, 10)] = text;
    }
    for (long r = 0; r < ranks; ++r) {
      auto it = seen.find(r);
      if (it == seen.end())
        failures.push_back("rank " + std::to_string(r) +
                           " never reported its exit status (it did not run, or was killed with its wrapper)");
      else if (it->second != "exit 0")
        failures.push_back("rank " + std::to_string(r) + " ended with " + it->second);
    }
    for (const auto& [r, text] : seen)
      if (r < 0 || r >= ranks) failures.push_back("unexpected rank " + std::to_string(r) + " (" + text + ")");
  }
  for (const auto& g : greps) {
    if (skipped) break;
    bool bad = false;
    if (!matches(output, g, bad))
      failures.push_back(bad ? "bad --grep regex /" + g + "/" : "the output lacks /" + g + "/");
  }
  for (const auto& g : rejects) {
    bool bad = false;
    if (matches(output, g, bad) || bad)
      failures.push_back(bad ? "bad --reject regex /" + g + "/" : "the output contains /" + g + "/");
  }

  std::printf("---- brisk_test_job: %s after %.1f s (expect %s%s, limit %ld s)\n",
              timed_out ? "killed at the time limit" : describe_status(status).c_str(), elapsed,
              exit_code >= 0 ? ("exit " + std::to_string(exit_code)).c_str() : expect.c_str(),
              ranks > 0 ? (", " + std::to_string(ranks) + " ranks").c_str() : "", timeout);
  std::error_code ec;
  fs::remove_all(job_dir, ec);
  for (const auto& f : failures) std::printf("FAIL: %s\n", f.c_str());
  if (failures.empty()) std::printf(skipped ? "SKIPPED\n" : "PASS\n");
  std::fflush(stdout);
  if (!failures.empty()) return 1;
  return skipped ? static_cast<int>(skip_code) : 0;
}
