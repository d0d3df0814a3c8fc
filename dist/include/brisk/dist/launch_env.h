// Which process of which job this is, read from the launcher's environment: OpenMPI's mpirun
// (OMPI_COMM_WORLD_*), Slurm's srun (SLURM_*) or any PMIx launcher (PMIX_RANK ...).
#pragma once
#include <cstdint>
#include <string>

#include "brisk/core/enums.h"

namespace brisk::dist {

// What started this process: OpenMPI's mpirun, Slurm's srun, another PMIx launcher, or nothing
// (a plain single process).
enum class Launcher : uint8_t { None, OpenMPI, Slurm, PMIx };

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;                  // rank among the processes on this host
  int local_world_size = 1;            // processes on this host
  Launcher launcher = Launcher::None;  // enum_name: "none", "openmpi", "slurm", "pmix"
  // True when a launcher started this process as part of a multi-process job, i.e. when
  // init() must load the MPI backend.
  bool multi_process() const { return launcher != Launcher::None; }
};

// Reads the environment. OpenMPI's variables win over Slurm's (mpirun inside an allocation),
// Slurm's over bare PMIx. Slurm counts only in a task of a job step (SLURM_STEP_ID set: a batch
// script's own shell has SLURM_PROCID=0 and SLURM_NTASKS too) with SLURM_NTASKS > 1 (docs/slurm.md).
// Malformed values throw brisk::Error naming the variable.
LaunchInfo detect_launch();

}  // namespace brisk::dist

namespace brisk {
template <>
struct EnumNames<dist::Launcher> {
  static constexpr std::array<std::pair<std::string_view, dist::Launcher>, 4> values{
      {{"none", dist::Launcher::None},
       {"openmpi", dist::Launcher::OpenMPI},
       {"slurm", dist::Launcher::Slurm},
       {"pmix", dist::Launcher::PMIx}}};
};
}  // namespace brisk
