// Which process of which job this is, read from the launcher's environment: OpenMPI's mpirun
// (OMPI_COMM_WORLD_*), Slurm's srun (SLURM_*) or any PMIx launcher (PMIX_RANK ...).
#pragma once
#include <string>

namespace brisk::dist {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // rank among the processes on this host
  int local_world_size = 1;  // processes on this host
  // "openmpi", "slurm", "pmix", or "none" (a plain single process).
  std::string launcher = "none";
  // True when a launcher started this process as part of a multi-process job, i.e. when
  // init() must load the MPI backend.
  bool multi_process() const { return launcher != "none"; }
};

// Reads the environment. OpenMPI's variables win over Slurm's (mpirun inside an allocation),
// Slurm's over bare PMIx. Slurm counts only in a task of a job step (SLURM_STEP_ID set: a batch
// script's own shell has SLURM_PROCID=0 and SLURM_NTASKS too) with SLURM_NTASKS > 1 (docs/slurm.md).
// Malformed values throw brisk::Error naming the variable.
LaunchInfo detect_launch();

}  // namespace brisk::dist
