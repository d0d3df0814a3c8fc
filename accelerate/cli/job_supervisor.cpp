// `brisk launch` stays the parent of the job it starts (mpirun, or the program itself for one
// process) instead of replacing itself with it, so that an interrupted launch says what happened:
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to brisk launch are passed on to the
// job (once: a terminal's Ctrl-C already reaches the whole foreground process group), and the
// launch exits with the job's status, or 128 + the signal's number when a signal stopped it, as a
// shell reports a program killed by a signal.
#include "job_supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace brisk::cli_commands {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

std::atomic<pid_t> g_child{-1};
std::atomic<int> g_signal{0};  // the first signal received (reported after the job ended)
std::atomic<int> g_sender{0};  // who sent it (0: the kernel, i.e. the terminal)

void on_signal(int sig, siginfo_t* info, void*) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, sig);
  if (expected == 0) g_sender = info ? static_cast<int>(info->si_pid) : 0;
  const pid_t child = g_child.load();
  // A signal the terminal generated (si_pid 0 or SI_KERNEL) reached the child's process group as
  // well; sending it again would count as a second Ctrl-C (mpirun's "abort now").
  const bool from_process = info && (info->si_code == SI_USER || info->si_code == SI_QUEUE) && info->si_pid != 0;
  if (child > 0 && from_process) ::kill(child, sig);
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

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGKILL:
      return "SIGKILL";
    default:
      return strsignal(sig);
  }
}

// Waits for the child (retrying after the signals that interrupt waitpid), announcing the first
// signal received as soon as it arrives.
int wait_for(pid_t child, const std::string& what, std::chrono::steady_clock::time_point start) {
  bool announced = false;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(child, &status, 0);
    if (r == child) break;
    if (r < 0 && errno != EINTR) {
      std::fprintf(stderr, "brisk launch: waiting for %s failed: %s\n", what.c_str(), std::strerror(errno));
      return 1;
    }
    if (const int sig = g_signal.load(); sig != 0 && !announced) {
      const int sender = g_sender.load();
      std::fprintf(stderr, "brisk launch: received %s%s after %.1f s: stopping %s\n", signal_name(sig),
                   sender ? (" from process " + std::to_string(sender)).c_str() : " (from the terminal)",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), what.c_str());
      announced = true;
    }
  }
  const int sig = g_signal.load();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sig != 0) {
    std::fprintf(stderr, "brisk launch: %s was stopped by %s after %.1f s\n", what.c_str(), signal_name(sig), secs);
    return 128 + sig;
  }
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "brisk launch: %s was killed by %s after %.1f s\n", what.c_str(),
                 signal_name(WTERMSIG(status)), secs);
    return 128 + WTERMSIG(status);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int run_job(const std::vector<std::string>& argv, const std::string& what) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Forwarding is in place before the child exists, so no signal falls between the two.
  install_forwarding();
  std::fflush(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "brisk launch: cannot start '%s': %s\n", argv[0].c_str(), std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    restore_defaults();
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "brisk launch: cannot start '%s': %s\n", argv[0].c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  g_child = child;
  // A signal that arrived between fork and here was not forwarded: pass it on now.
  if (const int sig = g_signal.load(); sig != 0 && g_sender.load() != 0) ::kill(child, sig);
  return wait_for(child, what, start);
}

}  // namespace brisk::cli_commands
