// How `brisk launch` turns flags, the config file and the host's facts into one command line:
// OpenMPI's mpirun with the right options, or the program itself for a single process.
// Pure functions, so every case is testable without starting anything.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "brisk/accelerate/config.h"
#include "brisk/accelerate/host.h"

namespace brisk::accelerate {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// What the launch decided. Optional fields stay unset when neither a flag nor the config set
// them: the program's Accelerator then applies its own default.
struct LaunchSettings {
  int num_processes = 2;
  int num_machines = 1;
  std::string hostfile;                        // empty: this host only
  std::optional<std::string> mixed_precision;  // BRISK_MIXED_PRECISION
  std::optional<bool> use_cpu;                 // BRISK_CPU
  std::vector<int> gpu_ids;                    // empty: all (CUDA_VISIBLE_DEVICES untouched)
  std::optional<double> timeout;               // BRISK_TIMEOUT_SECONDS
  std::optional<bool> debug;                   // BRISK_DEBUG
  std::optional<std::string> sharding;         // BRISK_SHARDING: none, zero1, zero2, zero3
  // Accelerate's flags for the rendezvous of a multi-machine job. brisk's processes meet through
  // mpirun, which starts them all from this host: on one machine these are ignored (as
  // Accelerate does); on several, machine_rank must be 0 (see resolve_launch) and the main process
  // is the hostfile's first host.
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;
  std::optional<int> gradient_accumulation_steps;  // BRISK_GRADIENT_ACCUMULATION_STEPS
  std::optional<int> num_cpu_threads_per_process;  // OMP_NUM_THREADS (default: cores / processes)
  std::string config_file;                         // the file that was read; empty when none
  bool tag_output = false;                         // prefix each output line with its rank
  std::vector<std::string> mpirun_args;            // passed to mpirun as they are, before PROGRAM
  // Times a failed job is started again; above 0 every rank sees BRISK_RESTART_COUNT (0 on the
  // first attempt, k on the k-th restart; docs/fault-tolerance.md).
  int max_restarts = 0;
  // Seconds a job that SIGTERM or SIGUSR1 preempted has to finish its step, save a checkpoint and
  // stop before the launcher kills it (docs/fault-tolerance.md, "Preemption").
  double preempt_grace = 90;
};

// `config` is the flags merged over the config file (merge()). With no num_processes there:
// 1 for distributed_type NO; else one process per listed gpu_id; else one per GPU when this
// build sees GPUs and use_cpu is off (and not MULTI_CPU); else 2. Throws brisk::Error for a multi-machine job without a
// hostfile (saying how to write one) or with a machine_rank other than 0 (brisk launches every
// machine from the main one).
LaunchSettings resolve_launch(const Config& config, const HostFacts& host);

struct LaunchCommand {
  std::vector<std::string> argv;  // to exec: mpirun ... PROGRAM ARGS, or PROGRAM ARGS
  EnvList env;                    // to set in the launcher's environment first (children inherit it)
  bool uses_mpirun = false;
};

// `environment` is the launcher's own environment (NAME, value): its BRISK_* variables are
// forwarded to every rank and an OMP_NUM_THREADS there is kept. A single process on this host
// (and no --tag-output) runs the program directly, so `brisk launch -n 1` needs no OpenMPI.
// mpirun gets: --allow-run-as-root when root; -n; --oversubscribe when this host gets more
// processes than cores; --hostfile; --tag-output; --bind-to none (ranks use OpenMP threads);
// loopback-only TCP for single-host jobs (btl and oob_tcp_if_include lo, and NCCL_SOCKET_IFNAME=lo
// unless the environment sets it: no socket of a single-host job listens beyond this host);
// -x for each forwarded variable.
LaunchCommand build_launch_command(const LaunchSettings& s, const HostFacts& host,
                                   const std::vector<std::string>& program, const EnvList& environment,
                                   const std::string& mpirun = "mpirun");

// The process's environment as (NAME, value) pairs.
EnvList current_environment();
// argv joined for a shell, quoting where needed (for --dry-run and error messages).
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace brisk::accelerate
