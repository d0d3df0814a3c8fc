// Building `brisk launch`'s command line (pure; the CLI only execs the result).
#include "brisk/accelerate/launch.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "brisk/accelerate/env_vars.h"
#include "brisk/util/error.h"

extern char** environ;

namespace brisk::accelerate {

LaunchSettings resolve_launch(const Config& c, const HostFacts& host) {
  validate(c, "launch");
  LaunchSettings s;
  s.num_machines = c.num_machines.value_or(1);
  s.hostfile = c.hostfile.value_or("");
  // accelerate launch runs once per machine (--machine_rank, meeting at --main_process_ip:port);
  // brisk launch runs once, on the main machine, and mpirun starts the other machines' processes
  // over ssh from the hostfile. docs/config-files.md compares the two.
  BRISK_CHECK(s.num_machines == 1 || !s.hostfile.empty(), "launch: num_machines is ", s.num_machines,
              " but no hostfile was given. brisk starts a multi-machine job from one machine: run `brisk launch` "
              "there only, with the machines listed in a file, one 'HOST slots=N' per line (the first is the main "
              "process's), passed as --hostfile FILE (Accelerate's --mpirun_hostfile, or hostfile / "
              "mpirun_config.mpirun_hostfile in the config). main_process_ip, main_process_port and machine_rank "
              "are not needed");
  BRISK_CHECK(s.num_machines == 1 || c.machine_rank.value_or(0) == 0, "launch: machine_rank is ", *c.machine_rank,
              ": brisk launch runs only on the main machine (machine_rank 0), and mpirun starts the processes of "
              "the other machines listed in the hostfile; do not run it on the others");
  s.mixed_precision = c.mixed_precision;
  s.use_cpu = c.use_cpu;
  s.sharding = c.sharding;
  if (c.gpu_ids) s.gpu_ids = parse_gpu_ids(*c.gpu_ids, "launch: gpu_ids");
  s.timeout = c.timeout;
  s.debug = c.debug;
  s.main_process_ip = c.main_process_ip;
  s.main_process_port = c.main_process_port;
  s.max_restarts = c.max_restarts.value_or(0);
  s.preempt_grace = c.preempt_grace.value_or(90);

  bool cpu = c.use_cpu.value_or(false);
  if (c.num_processes) {
    s.num_processes = *c.num_processes;
  } else if (c.distributed_type.value_or("") == "NO") {
    s.num_processes = 1;  // whatever the GPUs: NO means one process
  } else if (!cpu && !s.gpu_ids.empty()) {
    s.num_processes = static_cast<int>(s.gpu_ids.size()) * s.num_machines;
  } else if (!cpu && host.gpu_count > 0 && c.distributed_type.value_or("") != "MULTI_CPU") {
    s.num_processes = host.gpu_count * s.num_machines;
  } else {
    s.num_processes = 2;
  }
  BRISK_CHECK(s.num_processes >= s.num_machines, "launch: ", s.num_processes, " processes cannot fill ", s.num_machines,
              " machines; pass -n with at least one process per machine");
  return s;
}

LaunchCommand build_launch_command(const LaunchSettings& s, const HostFacts& host,
                                   const std::vector<std::string>& program, const EnvList& environment,
                                   const std::string& mpirun) {
  BRISK_CHECK(!program.empty(), "launch: no program given; usage: brisk launch [options] PROGRAM [ARGS]");
  BRISK_CHECK(s.num_processes >= 1, "launch: num_processes must be at least 1, got ", s.num_processes);
  auto inherited = [&](const std::string& name) -> const std::string* {
    for (const auto& [k, v] : environment)
      if (k == name) return &v;
    return nullptr;
  };

  LaunchCommand cmd;
  auto set = [&](const std::string& name, const std::string& value) { cmd.env.emplace_back(name, value); };
  set(env::kLaunched, "1");
  set(env::kNumMachines, std::to_string(s.num_machines));
  if (s.mixed_precision) set(env::kMixedPrecision, *s.mixed_precision);
  if (s.sharding) set(env::kSharding, *s.sharding);
  if (s.use_cpu) set(env::kCpu, *s.use_cpu ? "1" : "0");
  if (s.timeout) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *s.timeout);
    set(env::kTimeoutSeconds, buf);
  }
  if (s.debug) set(env::kDebug, *s.debug ? "1" : "0");
  if (s.gradient_accumulation_steps)
    set(env::kGradientAccumulationSteps, std::to_string(*s.gradient_accumulation_steps));
  if (!s.config_file.empty()) set(env::kConfigFile, s.config_file);
  // The launcher sets it again before each restart; mpirun's -x passes the value of the moment.
  if (s.max_restarts > 0) set(env::kRestartCount, "0");
  if (!s.gpu_ids.empty()) {
    std::string ids;
    for (int id : s.gpu_ids) {
      if (!ids.empty()) ids += ',';
      ids += std::to_string(id);
    }
    set("CUDA_VISIBLE_DEVICES", ids);
  }
  // N processes each starting one OpenMP thread per core would fight over the cores.
  int per_host = (s.num_processes + s.num_machines - 1) / s.num_machines;
  if (s.num_cpu_threads_per_process)
    set("OMP_NUM_THREADS", std::to_string(*s.num_cpu_threads_per_process));
  else if (!inherited("OMP_NUM_THREADS"))
    set("OMP_NUM_THREADS", std::to_string(std::max(1, host.cpu_cores / per_host)));

  bool single_host = s.num_machines == 1 && s.hostfile.empty();
  // A single-host job keeps every socket on loopback: NCCL's bootstrap and socket transport (the
  // variable set here, unless the user set their own) and OpenMPI's TCP transports (below).
  if (single_host && !inherited("NCCL_SOCKET_IFNAME")) set("NCCL_SOCKET_IFNAME", "lo");
  if (s.num_processes == 1 && single_host && !s.tag_output) {
    cmd.argv = program;
    return cmd;
  }

  cmd.uses_mpirun = true;
  std::vector<std::string>& a = cmd.argv;
  a.push_back(mpirun);
  if (host.is_root) a.emplace_back("--allow-run-as-root");
  a.insert(a.end(), {"-n", std::to_string(s.num_processes)});
  if (single_host && s.num_processes > host.cpu_cores) a.emplace_back("--oversubscribe");
  if (!s.hostfile.empty()) a.insert(a.end(), {"--hostfile", s.hostfile});
  if (s.tag_output) a.emplace_back("--tag-output");
  a.insert(a.end(), {"--bind-to", "none"});
  if (single_host) {
    // Shared memory between local ranks; TCP (and OpenMPI's own out-of-band channel) on loopback
    // only, so a host without a usable network, or with several interfaces, still works.
    a.insert(a.end(), {"--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca",
                       "oob_tcp_if_include", "lo"});
  }
  // Each process's OpenMP threads fill the cores given to it, and its communication thread runs
  // beside them: a rank that waits inside MPI must give its core back rather than spin, or it
  // takes the core from its own training thread until the scheduler's time slice ends
  // (docs/data-parallel.md, "Communication on full cores"). OpenMPI yields on its own only when
  // it sees more processes than slots. An OMPI_MCA_mpi_yield_when_idle in the environment wins.
  if (single_host && !inherited("OMPI_MCA_mpi_yield_when_idle"))
    a.insert(a.end(), {"--mca", "mpi_yield_when_idle", "1"});
  // Ranks on one host exchange large messages through shared-memory fragments, not OpenMPI's
  // single-copy path (CMA): when the ranks' collectives differ (a rank skipped one), that path
  // copies the whole larger message into the smaller receive buffer before it reports
  // MPI_ERR_TRUNCATE, so memory is overwritten before brisk can end the job; the fragment path
  // checks the size first (docs/data-parallel.md, "When a rank fails"). The user's own
  // OMPI_MCA_btl_vader_single_copy_mechanism decides instead when set.
  if (!inherited("OMPI_MCA_btl_vader_single_copy_mechanism"))
    a.insert(a.end(), {"--mca", "btl_vader_single_copy_mechanism", "none"});
  std::vector<std::string> forward;
  for (const auto& [k, v] : cmd.env) forward.push_back(k);
  for (const auto& [k, v] : environment)
    if (k.rfind("BRISK_", 0) == 0 || k == "OMP_NUM_THREADS" || (single_host && k == "NCCL_SOCKET_IFNAME"))
      forward.push_back(k);
  std::sort(forward.begin(), forward.end());
  forward.erase(std::unique(forward.begin(), forward.end()), forward.end());
  for (const std::string& name : forward) a.insert(a.end(), {"-x", name});
  a.insert(a.end(), s.mpirun_args.begin(), s.mpirun_args.end());
  a.insert(a.end(), program.begin(), program.end());
  return cmd;
}

EnvList current_environment() {
  EnvList out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    bool plain = !a.empty();
    for (char c : a)
      plain &= std::isalnum(static_cast<unsigned char>(c)) || std::string("-_./=:,+@%").find(c) != std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

}  // namespace brisk::accelerate
