// Running the job `brisk launch` starts as its child, passing on the signals a user or a batch
// system sends to the launch (job_supervisor.cpp).
#pragma once
#include <string>
#include <vector>

namespace brisk::cli_commands {

// Starts argv (searched on PATH) as a child, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2
// to it, and returns its exit status, or 128 + the signal's number when a signal stopped the job
// (printing which signal, from whom, and after how long). `what` names the job in those lines
// ("the job (2 processes under mpirun)").
int run_job(const std::vector<std::string>& argv, const std::string& what);

}  // namespace brisk::cli_commands
