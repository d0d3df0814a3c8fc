// Reading a failed job's output for the rank that failed and how: mpirun's report of a rank
// killed by a signal or exiting non-zero, brisk's "[brisk rank R] exiting with status S" (a rank's
// own failure), and the lines a surviving rank prints about the one it lost. The first line of
// the most direct kind wins: the rank's own exit or signal over another rank's account of it.
#include "job_failure.h"

#include <csignal>
#include <cstring>
#include <regex>

namespace brisk::cli_commands {

std::string signal_name(int sig) {
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
    case SIGABRT:
      return "SIGABRT";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    default:
      return strsignal(sig);
  }
}

namespace {

// A line kind: its pattern (group 1 the rank, group 2 a number where the kind has one), how
// directly it tells what happened, and the words for it.
struct Kind {
  std::regex pattern;
  int weight;
  std::string (*say)(const std::smatch&);
};

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {std::regex(R"(process rank (\d+) .*exited on signal (\d+))"), 3,
       [](const std::smatch& m) {
         const int sig = std::stoi(m[2].str());
         return "was killed by " + signal_name(sig) + " (signal " + std::to_string(sig) + ")";
       }},
      {std::regex(R"(\[brisk rank (\d+)\] exiting with status (\d+))"), 3,
       [](const std::smatch& m) { return "exited with status " + m[2].str(); }},
      {std::regex(R"(rank (\d+) \(process \d+\) exited while)"), 2,
       [](const std::smatch&) { return std::string("exited in the middle of a collective"); }},
      {std::regex(R"(rank (\d+) left the job)"), 2,
       [](const std::smatch&) { return std::string("left the job (its program exited early)"); }},
      {std::regex(R"(rank (\d+) is in no collective)"), 1,
       [](const std::smatch&) { return std::string("stopped calling collectives (the others timed out)"); }},
      {std::regex(R"(\[brisk rank (\d+)\] dist error: (.{0,100}))"), 0,
       [](const std::smatch& m) { return "failed in a collective: " + m[2].str(); }},
  };
  return k;
}

const std::regex kProcessName(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
const std::regex kExitCode(R"(Exit code:\s*(\d+))");

}  // namespace

void JobFailure::feed(std::string_view text) {
  const std::string line(text);
  std::smatch m;
  // mpirun's "the first process to exit non-zero was: Process name: [[j,R]] ... Exit code: S".
  if (std::regex_search(line, m, kProcessName)) {
    pending_rank_ = std::stoi(m[1].str());
    return;
  }
  if (pending_rank_ >= 0 && std::regex_search(line, m, kExitCode)) {
    if (weight_ < 3) {
      rank_ = pending_rank_;
      what_ = "rank " + std::to_string(rank_) + " exited with status " + m[1].str();
      weight_ = 3;
    }
    pending_rank_ = -1;
    return;
  }
  for (const Kind& k : kinds()) {
    if (k.weight <= weight_ || !std::regex_search(line, m, k.pattern)) continue;
    rank_ = std::stoi(m[1].str());
    what_ = "rank " + m[1].str() + " " + k.say(m);
    weight_ = k.weight;
    return;
  }
}

}  // namespace brisk::cli_commands
