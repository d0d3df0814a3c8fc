// Running the job `brisk launch` starts as its child, passing on the signals a user or a batch
// system sends to the launch, and starting it again after a failure (job_supervisor.cpp).
#pragma once
#include <string>
#include <vector>

namespace brisk::cli_commands {

// How the launcher runs the job (launch_cmd.cpp fills it from the settings).
struct JobOptions {
  int max_restarts = 0;  // run_job_restarting's budget
  // Seconds a job that SIGTERM or SIGUSR1 preempted has to finish its step, save and stop before
  // it is killed (--preempt_grace; docs/fault-tolerance.md).
  double preempt_grace = 90;
  // The job is mpirun, which would kill its ranks a second after a SIGTERM: a SIGTERM goes on to it
  // as SIGUSR1, which mpirun forwards to every rank.
  bool under_mpirun = false;
};

// Starts argv (searched on PATH) as a child, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2
// to it, and returns its exit status, or 128 + the signal's number when a signal stopped the job
// (printing which signal, from whom, and after how long). `what` names the job in those lines
// ("the job (2 processes under mpirun)").
// SIGTERM and SIGUSR1 preempt the job: each rank that calls Accelerator::stop_if_preempted saves and
// exits with status 75, and so does the launch; the job gets options.preempt_grace seconds to do so.
int run_job(const std::vector<std::string>& argv, const std::string& what, const JobOptions& options);

// run_job, and up to `max_restarts` times again while the job fails (a non-zero status) and the
// launcher itself received no signal: before each restart one line says which attempt failed,
// the rank that failed and how (read from the job's stderr, which then passes through the
// launcher), and BRISK_RESTART_COUNT is set to the restart's number. Returns the last attempt's
// status. A preempted job (status 75) is never started again. max_restarts 0 is run_job.
int run_job_restarting(const std::vector<std::string>& argv, const std::string& what, const JobOptions& options);

}  // namespace brisk::cli_commands
