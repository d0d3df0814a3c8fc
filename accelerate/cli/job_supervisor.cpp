// `brisk launch` stays the parent of the job it starts (mpirun, or the program itself for one
// process) instead of replacing itself with it, so that an interrupted launch says what happened:
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to brisk launch are passed on to the
// job (once: a terminal's Ctrl-C already reaches the whole foreground process group), and the
// launch exits with the job's status, or 128 + the signal's number when a signal stopped it, as a
// shell reports a program killed by a signal. With --max-restarts a failed job is started again
// (run_job_restarting), its stderr passing through the launcher to learn which rank failed. SIGTERM
// and SIGUSR1 preempt the job: its ranks save and exit with status 75 (docs/fault-tolerance.md,
// "Preemption"), and the launch exits with it. A job still running 5 s after a signal that stops it
// (SIGINT, SIGHUP, SIGQUIT), or --preempt_grace seconds (90) after one that preempts it, is killed
// with everything it started on this host.
#include "job_supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "brisk/accelerate/env_vars.h"
#include "job_failure.h"

namespace brisk::cli_commands {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

std::atomic<pid_t> g_child{-1};
std::atomic<int> g_signal{0};  // the first signal received (reported after the job ended)
std::atomic<int> g_sender{0};  // who sent it (0: the kernel, i.e. the terminal)
std::atomic<int> g_hurry{0};   // a signal that stops the job now, after one that preempts it
std::atomic<bool> g_under_mpirun{false};

bool preempts_job(int sig) {
  return sig == SIGTERM || sig == SIGUSR1;
}

bool stops_job(int sig) {
  return sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

void on_signal(int sig, siginfo_t* info, void*) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, sig);
  if (expected == 0) g_sender = info ? static_cast<int>(info->si_pid) : 0;
  if (expected != 0 && preempts_job(expected) && stops_job(sig)) g_hurry = sig;  // Ctrl-C while it saves
  const pid_t child = g_child.load();
  // A signal the terminal generated (si_pid 0 or SI_KERNEL) reached the child's process group as
  // well; sending it again would count as a second Ctrl-C (mpirun's "abort now").
  const bool from_process = info && (info->si_code == SI_USER || info->si_code == SI_QUEUE) && info->si_pid != 0;
  // mpirun answers SIGTERM by killing the ranks a second later; SIGUSR1 it passes on to them.
  const int forward = sig == SIGTERM && g_under_mpirun.load() ? SIGUSR1 : sig;
  if (child > 0 && from_process) ::kill(child, forward);
}

void install_forwarding() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: waitpid returns, and the signal is announced at once
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) ::sigaction(sig, &sa, nullptr);
}

void restore_defaults() {
  for (int sig : kForwarded) ::signal(sig, SIG_DFL);
}

// The launch's exit status once the job ended: 128 + the signal that stopped it (received by
// brisk launch, or the one that killed the job), else the job's own status.
int job_status(int status, const std::string& what, double secs) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == accelerate::kPreemptedStatus) {
    const int sig = g_signal.load();
    std::fprintf(stderr,
                 "brisk launch: %s was preempted%s after %.1f s: every rank saved a checkpoint and stopped (the "
                 "line above says where); exiting with status %d: start the same command again to continue\n",
                 what.c_str(), sig != 0 && preempts_job(sig) ? (" by " + signal_name(sig)).c_str() : "", secs,
                 accelerate::kPreemptedStatus);
    return accelerate::kPreemptedStatus;
  }
  if (const int sig = g_signal.load(); sig != 0) {
    std::fprintf(stderr, "brisk launch: %s was stopped by %s after %.1f s\n", what.c_str(), signal_name(sig).c_str(),
                 secs);
    return 128 + sig;
  }
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "brisk launch: %s was killed by %s after %.1f s\n", what.c_str(),
                 signal_name(WTERMSIG(status)).c_str(), secs);
    return 128 + WTERMSIG(status);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// How long the job may take to stop after a signal that stops it (SIGINT, SIGHUP, SIGQUIT) before
// brisk launch kills it: mpirun stops its ranks within a second or two, but under heavy load it has
// been seen to wait a minute with its ranks gone; the job must end within seconds. A preempted job
// gets JobOptions::preempt_grace instead: it finishes its step and saves a checkpoint first.
constexpr double kStopGrace = 5;

// Every living process below `root` on this host (its children, theirs, ...), read from /proc.
std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc", std::filesystem::directory_options::skip_permission_denied)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: the command may hold spaces and parentheses, so read after the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    // A zombie (a rank that ended, not yet reaped by a busy mpirun) has nothing left to stop.
    if (rest >> state >> ppid && state != "Z" && state != "X")
      parent_of.emplace_back(static_cast<pid_t>(std::stol(name)), ppid);
  }
  std::vector<pid_t> found{root};
  for (size_t i = 0; i < found.size(); ++i)
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == found[i]) found.push_back(pid);
  found.erase(found.begin());
  return found;
}

// The job did not stop in time: SIGKILL for it and everything it started on this host.
void kill_job(pid_t child, int sig, double grace, const std::string& what) {
  const std::vector<pid_t> below = descendants(child);
  std::fprintf(stderr, "brisk launch: %s did not stop within %g s of %s: killing it and its %zu process(es)\n",
               what.c_str(), grace, signal_name(sig).c_str(), below.size());
  for (pid_t p : below) ::kill(p, SIGKILL);
  ::kill(child, SIGKILL);
}

// The line that says a signal arrived, and how long the job now has to stop (0: it is not stopped).
double announce(int sig, double after, double preempt_grace, const std::string& what) {
  const int sender = g_sender.load();
  const std::string from = sender ? " from process " + std::to_string(sender) : " (from the terminal)";
  if (preempts_job(sig)) {
    std::fprintf(stderr,
                 "brisk launch: received %s%s after %.1f s: preempting %s: each rank finishes its step, saves a "
                 "checkpoint and stops (killed if still running in %g s)\n",
                 signal_name(sig).c_str(), from.c_str(), after, what.c_str(), preempt_grace);
    return preempt_grace;
  }
  std::fprintf(stderr, "brisk launch: received %s%s after %.1f s: stopping %s\n", signal_name(sig).c_str(),
               from.c_str(), after, what.c_str());
  return stops_job(sig) ? kStopGrace : 0;
}

// When the launcher kills a job that a signal should have stopped: the earliest deadline set.
struct KillDeadline {
  using Clock = std::chrono::steady_clock;
  Clock::time_point at = Clock::time_point::max();  // max: none
  double grace = 0;                                 // the seconds that deadline gave
  bool armed() const { return at != Clock::time_point::max(); }
  bool due() const { return armed() && Clock::now() >= at; }
  void arm(double seconds) {
    const auto t = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    if (t < at) at = t, grace = seconds;
  }
};

// Waits for the child (retrying after the signals that interrupt waitpid), announcing the first
// signal received as soon as it arrives; a job that a signal should stop gets kStopGrace to do so,
// one that it preempts preempt_grace (cut to kStopGrace by a Ctrl-C meanwhile, or under mpirun once
// no rank is left on this host: nothing is saving then, and mpirun under heavy load has been seen
// to linger a minute without its ranks).
int wait_for(pid_t child, const std::string& what, std::chrono::steady_clock::time_point start, double preempt_grace,
             int* raw) {
  using Clock = std::chrono::steady_clock;
  bool announced = false, hurried = false, ranks_gone = false;
  KillDeadline deadline;
  Clock::time_point next_look = Clock::now();
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(child, &status, deadline.armed() ? WNOHANG : 0);
    if (r == child) break;
    if (r < 0 && errno != EINTR) {
      std::fprintf(stderr, "brisk launch: waiting for %s failed: %s\n", what.c_str(), std::strerror(errno));
      return 1;
    }
    if (const int sig = g_signal.load(); sig != 0 && !announced) {
      const double grace =
          announce(sig, std::chrono::duration<double>(Clock::now() - start).count(), preempt_grace, what);
      announced = true;
      if (grace > 0) deadline.arm(grace);
    }
    if (const int sig = g_hurry.load(); sig != 0 && announced && !hurried) {
      std::fprintf(stderr, "brisk launch: received %s while the job saves: stopping %s now\n", signal_name(sig).c_str(),
                   what.c_str());
      hurried = true;
      deadline.arm(kStopGrace);
    }
    if (deadline.armed() && g_under_mpirun.load() && !ranks_gone && Clock::now() >= next_look) {
      next_look = Clock::now() + std::chrono::milliseconds(500);
      if (descendants(child).empty()) ranks_gone = true, deadline.arm(kStopGrace);
    }
    if (deadline.due()) {
      kill_job(child, g_signal.load(), deadline.grace, what);
      deadline = {};
    } else if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  *raw = status;
  return job_status(status, what, std::chrono::duration<double>(Clock::now() - start).count());
}

// Copies the job's stderr (a pipe's read end) to the launcher's as it comes, line by line into a
// JobFailure, on a thread of its own while the launcher waits for the job.
class StderrWatch {
 public:
  StderrWatch() {
    if (::pipe(fd_) != 0) fd_[0] = fd_[1] = -1;
  }
  ~StderrWatch() {
    for (int fd : fd_)
      if (fd >= 0) ::close(fd);
  }
  StderrWatch(const StderrWatch&) = delete;
  StderrWatch& operator=(const StderrWatch&) = delete;

  // In the child: its stderr becomes the pipe.
  void attach_child() const {
    if (fd_[1] < 0) return;
    ::dup2(fd_[1], STDERR_FILENO);
    ::close(fd_[0]);
    ::close(fd_[1]);
  }
  // In the launcher, once the child runs.
  void start() {
    if (fd_[1] < 0) return;
    ::close(fd_[1]);
    fd_[1] = -1;
    reader_ = std::thread([this] { copy(); });
  }
  // After the job ended: what is left in the pipe (ranks' last lines, at most 2 s of them).
  const JobFailure& finish() {
    stop_ = std::chrono::steady_clock::now().time_since_epoch().count();
    if (reader_.joinable()) reader_.join();
    if (!partial_.empty()) failure_.feed(partial_);
    return failure_;
  }

 private:
  void copy() {
    char buf[4096];
    for (;;) {
      pollfd p{fd_[0], POLLIN, 0};
      const int ready = ::poll(&p, 1, 100);
      if (ready < 0 && errno == EINTR) continue;
      const int64_t stopped = stop_.load();
      if (ready == 0) {
        if (stopped != 0) return;  // the job ended and nothing more came for 100 ms
        continue;
      }
      const ssize_t n = ::read(fd_[0], buf, sizeof buf);
      if (n <= 0) return;
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = ::write(STDERR_FILENO, buf + off, static_cast<size_t>(n - off));
        if (w <= 0) break;
        off += w;
      }
      lines(std::string_view(buf, static_cast<size_t>(n)));
      if (stopped != 0 && std::chrono::steady_clock::now().time_since_epoch().count() - stopped >
                              std::chrono::steady_clock::duration(std::chrono::seconds(2)).count())
        return;
    }
  }
  void lines(std::string_view chunk) {
    for (char c : chunk) {
      if (c != '\n') {
        if (partial_.size() < 4096) partial_ += c;
        continue;
      }
      failure_.feed(partial_);
      partial_.clear();
    }
  }

  int fd_[2] = {-1, -1};
  std::thread reader_;
  std::atomic<int64_t> stop_{0};  // when the job ended (steady clock ticks); 0 while it runs
  std::string partial_;
  JobFailure failure_;
};

// One attempt: starts the child (its stderr into `watch` when given) and waits for it.
struct Attempt {
  int status = 1;      // as run_job returns
  int raw_status = 0;  // waitpid's, for how a job without mpirun ended
  double seconds = 0;
};

Attempt run_once(const std::vector<std::string>& argv, const std::string& what, const JobOptions& options,
                 StderrWatch* watch) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Forwarding is in place before the child exists, so no signal falls between the two.
  g_under_mpirun = options.under_mpirun;
  install_forwarding();
  std::fflush(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "brisk launch: cannot start '%s': %s\n", argv[0].c_str(), std::strerror(errno));
    return {};
  }
  if (child == 0) {
    restore_defaults();
    if (watch) watch->attach_child();
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "brisk launch: cannot start '%s': %s\n", argv[0].c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  g_child = child;
  if (watch) watch->start();
  // A signal that arrived between fork and here was not forwarded: pass it on now.
  if (const int sig = g_signal.load(); sig != 0 && g_sender.load() != 0)
    ::kill(child, sig == SIGTERM && options.under_mpirun ? SIGUSR1 : sig);
  Attempt a;
  a.status = wait_for(child, what, start, options.preempt_grace, &a.raw_status);
  g_child = -1;
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return a;
}

// How the attempt failed: the rank and what the job's lines say, else how `what` ended (the
// program itself without mpirun: the job's only rank).
std::string describe(const Attempt& a, const JobFailure& f, const std::string& what) {
  if (!f.what().empty()) return f.what();
  if (WIFSIGNALED(a.raw_status)) {
    const int sig = WTERMSIG(a.raw_status);
    return what + " was killed by " + signal_name(sig) + " (signal " + std::to_string(sig) + ")";
  }
  return what + " exited with status " + std::to_string(a.status) + " (no rank's failure line was seen)";
}

}  // namespace

int run_job(const std::vector<std::string>& argv, const std::string& what, const JobOptions& options) {
  return run_once(argv, what, options, nullptr).status;
}

int run_job_restarting(const std::vector<std::string>& argv, const std::string& what, const JobOptions& options) {
  const int max_restarts = options.max_restarts;
  if (max_restarts <= 0) return run_job(argv, what, options);
  const int attempts = max_restarts + 1;
  for (int k = 0;; ++k) {
    ::setenv(accelerate::env::kRestartCount, std::to_string(k).c_str(), 1);
    StderrWatch watch;
    const Attempt a = run_once(argv, what, options, &watch);
    const JobFailure& f = watch.finish();
    // Success, the launcher was told to stop (a user's Ctrl-C, the batch system's SIGTERM), or a
    // job preempted and saved (its ranks got the signal themselves): no restart.
    if (a.status == 0 || g_signal.load() != 0 || a.status == accelerate::kPreemptedStatus) return a.status;
    const std::string how = describe(a, f, what);
    if (k == max_restarts) {
      std::fprintf(stderr,
                   "brisk launch: attempt %d of %d failed after %.1f s: %s; no restarts left (--max-restarts %d): "
                   "exiting with status %d\n",
                   k + 1, attempts, a.seconds, how.c_str(), max_restarts, a.status);
      return a.status;
    }
    std::fprintf(stderr,
                 "brisk launch: attempt %d of %d failed after %.1f s: %s (status %d); starting the whole job "
                 "again (BRISK_RESTART_COUNT=%d)\n",
                 k + 1, attempts, a.seconds, how.c_str(), a.status, k + 1);
  }
}

}  // namespace brisk::cli_commands
