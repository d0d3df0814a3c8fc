// Running the job `brisk launch` starts as its child, passing on the signals a user or a batch
// system sends to the launch, and starting it again after a failure (job_supervisor.cpp).
#pragma once
#include <string>
#include <vector>

namespace brisk::cli_commands {

// Starts argv (searched on PATH) as a child, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2
// to it, and returns its exit status, or 128 + the signal's number when a signal stopped the job
// (printing which signal, from whom, and after how long). `what` names the job in those lines
// ("the job (2 processes under mpirun)").
int run_job(const std::vector<std::string>& argv, const std::string& what);

// run_job, and up to `max_restarts` times again while the job fails (a non-zero status) and the
// launcher itself received no signal: before each restart one line says which attempt failed,
// the rank that failed and how (read from the job's stderr, which then passes through the
// launcher), and BRISK_RESTART_COUNT is set to the restart's number. Returns the last attempt's
// status. max_restarts 0 is run_job.
int run_job_restarting(const std::vector<std::string>& argv, const std::string& what, int max_restarts);

}  // namespace brisk::cli_commands
