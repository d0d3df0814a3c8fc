// Which rank of a failed job failed, and how, read from the lines the job printed: brisk's own
// failure lines and mpirun's reports (job_failure.cpp). `brisk launch --max-restarts` names it in
// its restart line.
#pragma once
#include <string>
#include <string_view>

namespace brisk::cli_commands {

class JobFailure {
 public:
  // One line of the job's stderr, without its newline.
  void feed(std::string_view line);
  // "rank 1 was killed by SIGKILL (signal 9)", "rank 2 exited with status 1", ...; empty when no
  // line named a failing rank.
  const std::string& what() const { return what_; }
  int rank() const { return rank_; }

 private:
  std::string what_;
  int rank_ = -1;
  int weight_ = -1;        // how directly the line chosen says what happened (a cause beats a witness)
  int pending_rank_ = -1;  // mpirun's "Process name: [[job,vpid],R]", waiting for its "Exit code:"
};

// "SIGKILL", "SIGTERM", ... (strsignal's text for the others).
std::string signal_name(int sig);

}  // namespace brisk::cli_commands
