// `brisk launch [options] PROGRAM [ARGS]`: flags over the config file over defaults, then exec
// OpenMPI's mpirun (or the program itself for one process) with the command build_launch_command made.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "brisk/accelerate/config.h"
#include "brisk/accelerate/host.h"
#include "brisk/accelerate/launch.h"
#include "brisk/util/cli.h"
#include "brisk/util/error.h"
#include "commands.h"
#include "job_supervisor.h"

namespace brisk::cli_commands {

using namespace brisk::accelerate;

int fail(const std::string& command, const std::string& message) {
  // Library errors name their op ("launch: ..."); do not repeat it after "brisk launch: ".
  std::string text = message;
  std::string op = command.substr(command.rfind(' ') + 1) + ": ";
  if (text.rfind(op, 0) == 0) text = text.substr(op.size());
  std::fprintf(stderr, "%s: %s\n", command.c_str(), text.c_str());
  return 1;
}

// The config file in force: --config_file (must exist), else the default path when it exists.
// Returns the path read (empty when none) and fills `out`.
// Keys Accelerate wrote that brisk has no use for are named once on stderr.
std::string read_config(const std::string& given_path, accelerate::Config& out) {
  std::string path = given_path;
  if (path.empty()) {
    path = default_config_path();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return "";
  }
  std::vector<std::string> ignored;
  out = load_config(path, &ignored);
  if (!ignored.empty()) {
    std::string names;
    for (const std::string& k : ignored) names += (names.empty() ? "" : ", ") + k;
    std::fprintf(stderr, "brisk: %s: ignoring settings brisk has no use for: %s (docs/config-files.md)\n", path.c_str(),
                 names.c_str());
  }
  return path;
}

std::string default_config_hint() {
  try {
    return default_config_path();
  } catch (const brisk::Error&) {
    return "~/.config/brisk/default_config.yaml";
  }
}

// With several machines, rank 0 runs on the hostfile's first host: that is the main process's
// machine, so a main_process_ip naming another one is an error rather than silently wrong.
void check_main_host(const std::string& hostfile, const std::string& main_ip) {
  std::ifstream in(hostfile);
  BRISK_CHECK(in.good(), "launch: cannot read hostfile '", hostfile, "'");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string host;
    if (!(words >> host) || host[0] == '#') continue;
    BRISK_CHECK(host == main_ip, "launch: main_process_ip is ", main_ip, " but the hostfile's first host is ", host,
                ", where mpirun starts rank 0 (the main process); list ", main_ip, " first in ", hostfile,
                " or drop main_process_ip");
    return;
  }
  BRISK_THROW("launch: hostfile '", hostfile, "' lists no host");
}

// What the command line says: the settings it overrides (`flags`) and launch's own options.
struct LaunchFlags {
  Config flags;  // only what the command line sets; the config file and defaults fill the rest
  std::string config_file, mpirun_args, mpirun_hostfile;
  bool tag_output = false, dry_run = false, multi_gpu = false;
  std::optional<int> accumulation, threads;
  std::optional<double> monitor_interval;  // accepted for Accelerate's and torchrun's sake
};

void add_flags(cli::Parser& p, LaunchFlags& f) {
  Config& flags = f.flags;
  // Accelerate's launch flags first, with their meaning; then brisk's own.
  p.add("config_file", "config to read instead of the default one (Accelerate's default_config.yaml reads too)",
        &f.config_file);
  p.add("cpu", "run on the CPU even where GPUs are present (BRISK_CPU=1)", &flags.use_cpu);
  p.add("multi_gpu", "one process per GPU (distributed_type MULTI_GPU)", &f.multi_gpu);
  p.add("mixed_precision", "no, fp16 or bf16 (BRISK_MIXED_PRECISION)", &flags.mixed_precision);
  p.add("sharding", "none, zero1, zero2 or zero3: ZeRO stage of sharded data parallelism (BRISK_SHARDING)",
        &flags.sharding);
  p.add("num_processes",
        "processes to start (default: the config's, else one per GPU, else 2); one process runs directly, "
        "without mpirun",
        &flags.num_processes, 'n');
  p.add("num_machines", "hosts in the job (more than 1 needs --hostfile) (default: 1)", &flags.num_machines);
  p.add("machine_rank",
        "this host's index; brisk launches every host from the main one, so only 0 is accepted when "
        "num_machines > 1 (ignored on one machine)",
        &flags.machine_rank);
  p.add("main_process_ip", "the main host; with several machines it must be the hostfile's first (ignored on one)",
        &flags.main_process_ip);
  p.add("main_process_port", "accepted for Accelerate's sake: mpirun connects the processes, no port is needed",
        &flags.main_process_port);
  p.add("gpu_ids", "GPUs to use, e.g. 0,1 (sets CUDA_VISIBLE_DEVICES; default all)", &flags.gpu_ids);
  p.add("gradient_accumulation_steps", "the Accelerator's default (BRISK_GRADIENT_ACCUMULATION_STEPS)",
        &f.accumulation);
  p.add("num_cpu_threads_per_process", "OMP_NUM_THREADS of each process (default: cores / processes per host)",
        &f.threads);
  p.add("mpirun_hostfile", "OpenMPI hostfile: one 'HOST slots=N' line per machine (same as --hostfile)",
        &f.mpirun_hostfile);
  p.add("debug", "ranks check they call the same collectives (BRISK_DEBUG=1)", &flags.debug);
  p.add("hostfile", "OpenMPI hostfile: one 'HOST slots=N' line per machine", &flags.hostfile);
  p.add("timeout", "seconds a collective may take before the job fails (BRISK_TIMEOUT_SECONDS)", &flags.timeout);
  p.add("tag_output", "prefix each output line with [job,rank]", &f.tag_output);
  p.add("mpirun_args", "extra arguments for mpirun, split at spaces (e.g. \"--mca plm_rsh_agent ssh\")",
        &f.mpirun_args);
  p.add("dry_run", "print the command (and the variables it sets) instead of running it", &f.dry_run);
  p.add("max_restarts",
        "start a failed job again, up to this many times (the program sees BRISK_RESTART_COUNT; "
        "docs/fault-tolerance.md) (default: 0)",
        &flags.max_restarts);
  p.add("preempt_grace",
        "seconds a job preempted by SIGTERM or SIGUSR1 has to finish its step, save a checkpoint and stop "
        "before it is killed (docs/fault-tolerance.md) (default: 90)",
        &flags.preempt_grace);
  p.add("monitor_interval", "accepted for Accelerate's sake: brisk launch learns of a failure as it happens",
        &f.monitor_interval);
}

// The launch's settings: the flags over the config file over the defaults, checked, and the host
// facts they depend on (`host`).
LaunchSettings resolve_settings(LaunchFlags& f, HostFacts& host) {
  Config& flags = f.flags;
  if (f.multi_gpu) {
    BRISK_CHECK(!flags.use_cpu.value_or(false), "launch: --multi_gpu and --cpu contradict each other");
    flags.distributed_type = "MULTI_GPU";
  }
  if (!f.mpirun_hostfile.empty()) {
    BRISK_CHECK(!flags.hostfile || *flags.hostfile == f.mpirun_hostfile, "launch: --mpirun_hostfile '",
                f.mpirun_hostfile, "' and --hostfile '", *flags.hostfile, "' differ; give one");
    flags.hostfile = f.mpirun_hostfile;
  }
  BRISK_CHECK(f.accumulation.value_or(1) >= 1, "launch: --gradient_accumulation_steps must be at least 1, got ",
              *f.accumulation);
  BRISK_CHECK(f.monitor_interval.value_or(1) > 0, "launch: --monitor_interval must be positive, got ",
              f.monitor_interval.value_or(0));
  BRISK_CHECK(f.threads.value_or(1) >= 1, "launch: --num_cpu_threads_per_process must be at least 1, got ", *f.threads);
  validate(flags, "");
  Config file;
  std::string used = read_config(f.config_file, file);
  Config merged = merge(flags, file);
  // Counting GPUs starts the CUDA runtime: only do it when the process count depends on it
  // (resolve_launch: -n or the config's num_processes, else one per listed or visible GPU, else 2).
  host = {::geteuid() == 0, usable_cpu_cores(),
          merged.num_processes || merged.gpu_ids.value_or("all") != "all" || merged.use_cpu.value_or(false) ||
                  merged.distributed_type.value_or("MULTI_GPU") != "MULTI_GPU"
              ? 0
              : usable_gpu_count()};
  LaunchSettings settings = resolve_launch(merged, host);
  settings.config_file = used;
  settings.gradient_accumulation_steps = f.accumulation;
  settings.num_cpu_threads_per_process = f.threads;
  if (settings.num_machines > 1 && merged.main_process_ip) check_main_host(settings.hostfile, *merged.main_process_ip);
  return settings;
}

// Why `mpirun` cannot start the job ("" when it can): it must be OpenMPI's.
std::string mpirun_problem(const std::string& mpirun) {
  const char* override_path = std::getenv("BRISK_MPIRUN");
  if (mpirun.empty() && override_path && *override_path)
    return std::string("BRISK_MPIRUN is '") + override_path + "', which is not an executable program";
  if (mpirun.empty())
    return "mpirun not found: install OpenMPI (apt-get install openmpi-bin), or run a single process "
           "with -n 1, which needs no MPI";
  std::string version = mpi_version(mpirun);
  if (version.find("Open MPI") == std::string::npos)
    return "OpenMPI's mpirun is needed, but '" + mpirun + "' reports '" +
           (version.empty() ? std::string("nothing for --version") : version) +
           "'; install openmpi-bin or set BRISK_MPIRUN to OpenMPI's mpirun";
  return "";
}

int launch(int argc, char** argv) {
  const std::string me = argv[0];
  cli::Parser p(me,
                "Starts PROGRAM as N processes with OpenMPI's mpirun (a single process runs directly, no\n"
                "OpenMPI needed), passes the settings on as BRISK_* environment variables, stops every\n"
                "process when one fails and exits with the program's status. Flags override the config file\n"
                "(`brisk config` writes it; default " +
                    default_config_hint() + ").");
  LaunchFlags f;
  add_flags(p, f);
  p.allow_positionals("PROGRAM [ARGS...]", /*stop_at_first=*/true);
  if (!p.parse(argc, argv)) return p.exit_code();
  if (p.positionals().empty())
    return fail(me, "no program given\nusage: " + me + " [options] PROGRAM [ARGS...]   (see '" + me + " --help')");

  LaunchSettings settings;
  HostFacts host;
  try {
    settings = resolve_settings(f, host);
  } catch (const brisk::Error& e) {
    return fail(me, e.message());
  }
  settings.tag_output = f.tag_output;
  std::istringstream extra(f.mpirun_args);
  for (std::string word; extra >> word;) settings.mpirun_args.push_back(word);
  if (!settings.hostfile.empty() && ::access(settings.hostfile.c_str(), R_OK) != 0)
    return fail(me, "cannot read hostfile '" + settings.hostfile + "': " + std::strerror(errno));

  const std::vector<std::string>& program = p.positionals();
  std::string resolved = find_program(program[0]);
  if (resolved.empty()) {
    if (program[0].find('/') != std::string::npos)
      return fail(me,
                  "cannot run '" + program[0] + "': " +
                      (::access(program[0].c_str(), F_OK) == 0 ? "it is not executable (chmod +x?)" : "no such file"));
    return fail(me, "program '" + program[0] + "' not found on PATH; give its path, e.g. ./" + program[0]);
  }

  std::string mpirun = find_mpirun();
  LaunchCommand cmd =
      build_launch_command(settings, host, program, current_environment(), mpirun.empty() ? "mpirun" : mpirun);
  if (f.dry_run) {
    for (const auto& [k, v] : cmd.env) std::printf("%s ", shell_join({std::string(k).append("=").append(v)}).c_str());
    std::printf("%s\n", shell_join(cmd.argv).c_str());
    if (settings.max_restarts > 0)
      std::printf("# a failed job starts again, up to %d time(s), with BRISK_RESTART_COUNT=1, 2, ...\n",
                  settings.max_restarts);
    return 0;
  }
  if (cmd.uses_mpirun)
    if (const std::string problem = mpirun_problem(mpirun); !problem.empty()) return fail(me, problem);
  for (const auto& [k, v] : cmd.env) ::setenv(k.c_str(), v.c_str(), 1);
  const std::string what = cmd.uses_mpirun
                               ? "the job (" + std::to_string(settings.num_processes) + " processes under mpirun)"
                               : "the program";
  return run_job_restarting(cmd.argv, what,
                            {.max_restarts = settings.max_restarts,
                             .preempt_grace = settings.preempt_grace,
                             .under_mpirun = cmd.uses_mpirun});
}

}  // namespace brisk::cli_commands
