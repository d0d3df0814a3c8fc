// Reads rank, world size, local rank and local world size from mpirun's, srun's or a PMIx
// launcher's environment variables.
#include "brisk/dist/launch_env.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "brisk/util/env.h"
#include "brisk/util/error.h"
#include "brisk/util/trace.h"

namespace brisk::dist {

namespace {
// BRISK_TRACE names its files by rank (brisk/util/trace.h); this library knows the launchers.
[[maybe_unused]] const bool g_trace_rank_source_installed =
    (trace_set_rank_source([] { return detect_launch().rank; }), true);
}  // namespace
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

// A count or an index from the launcher: an exact decimal integer in [lo, 2^30) (the message names the variable).
int env_int(const char* name, int fallback, int lo = 0) {
  const char* v = env(name);
  if (!v) return fallback;
  constexpr int hi = (1 << 30) - 1;
  const std::optional<int> x = parse_integer<int>(v);
  BRISK_CHECK(x && *x >= lo && *x <= hi, "dist::detect_launch: environment variable ", name, "='", v,
              "' is not an integer in [", lo, ", ", hi, "]");
  return *x;
}

// Slurm writes tasks per node compressed: "2(x3),1" = 2, 2, 2, 1. Returns the entry of `node`.
int slurm_tasks_on_node(const std::string& spec, int node) {
  int index = 0;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // "<count>" or "<count>(x<repeat>)", each an exact decimal integer.
    std::optional<int> count, repeat = 1;
    if (size_t x = item.find("(x"); x != std::string::npos) {
      count = parse_integer<int>(std::string_view(item).substr(0, x));
      repeat = item.back() == ')' ? parse_integer<int>(std::string_view(item).substr(x + 2, item.size() - x - 3))
                                  : std::nullopt;
    } else {
      count = parse_integer<int>(item);
    }
    BRISK_CHECK(count && repeat && *count > 0 && *repeat > 0 && *repeat < (1 << 30),
                "dist::detect_launch: cannot parse SLURM_TASKS_PER_NODE='", spec,
                "' (expected entries such as 2 or 2(x3), separated by commas)");
    if (node < index + *repeat) return *count;
    index += *repeat;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  BRISK_THROW("dist::detect_launch: SLURM_TASKS_PER_NODE='", spec, "' has no entry for SLURM_NODEID=", node);
}

}  // namespace

LaunchInfo detect_launch() {
  LaunchInfo info;
  if (env("OMPI_COMM_WORLD_SIZE")) {
    info.launcher = Launcher::OpenMPI;
    info.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    info.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, 1);
    info.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    info.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1);
  } else if (env("SLURM_PROCID") && (env("SLURM_STEP_ID") || env("SLURM_STEPID")) && env_int("SLURM_NTASKS", 1) > 1) {
    // Only a task of a job step (srun) is a rank: the batch script's own shell has SLURM_PROCID=0
    // and SLURM_NTASKS=<tasks> too, but no step id.
    info.launcher = Launcher::Slurm;
    info.rank = env_int("SLURM_PROCID", 0);
    info.world_size = env_int("SLURM_NTASKS", 1, 1);
    info.local_rank = env_int("SLURM_LOCALID", 0);
    if (const char* per_node = env("SLURM_NTASKS_PER_NODE"); per_node && !env("SLURM_TASKS_PER_NODE")) {
      info.local_world_size = env_int("SLURM_NTASKS_PER_NODE", 1, 1);
    } else if (const char* spec = env("SLURM_TASKS_PER_NODE")) {
      info.local_world_size = slurm_tasks_on_node(spec, env_int("SLURM_NODEID", 0));
    } else {
      info.local_world_size = info.world_size;
    }
  } else if (env("PMIX_RANK")) {
    // PMIx exports only the rank; the MPI backend learns the rest when it starts.
    info.launcher = Launcher::PMIx;
    info.rank = env_int("PMIX_RANK", 0);
    info.world_size = env_int("PMIX_SIZE", 0);
    info.local_rank = env_int("PMIX_LOCAL_RANK", 0);
    info.local_world_size = env_int("PMIX_LOCAL_SIZE", 0);
  }
  BRISK_CHECK(info.world_size == 0 || info.rank < info.world_size, "dist::detect_launch: rank ", info.rank,
              " is not below the world size ", info.world_size, " (launcher ", enum_name(info.launcher), ")");
  return info;
}

}  // namespace brisk::dist
