// Launcher detection (mpirun, srun, PMIx) and the world of one: everything here runs in a
// single process without MPI.
#include <gtest/gtest.h>

#include <brisk/brisk.h>

#include <cstdlib>
#include <map>
#include <string>

using namespace brisk;

namespace {

// Sets environment variables for one test and restores the previous values.
class EnvGuard {
 public:
  using Vars = std::initializer_list<std::pair<const char*, const char*>>;
  explicit EnvGuard(Vars vars) {
    for (const char* k :
         {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASKS_PER_NODE",
          "SLURM_NTASKS_PER_NODE", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_JOB_ID", "PMIX_RANK"}) {
      const char* v = std::getenv(k);
      if (v) saved_[k] = v;
      unsetenv(k);
    }
    for (auto& [k, v] : vars) {
      setenv(k, v, 1);
      set_[k] = v;
    }
  }
  ~EnvGuard() {
    for (auto& [k, v] : set_) unsetenv(k.c_str());
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_, set_;
};

}  // namespace

TEST(LaunchEnv, PlainProcessIsAWorldOfOne) {
  EnvGuard g(EnvGuard::Vars{});
  auto info = dist::detect_launch();
  EXPECT_EQ(info.launcher, dist::Launcher::None);
  EXPECT_FALSE(info.multi_process());
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
}

TEST(LaunchEnv, ReadsOpenMpiVariables) {
  EnvGuard g({{"OMPI_COMM_WORLD_SIZE", "8"},
              {"OMPI_COMM_WORLD_RANK", "5"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  auto info = dist::detect_launch();
  EXPECT_EQ(info.launcher, dist::Launcher::OpenMPI);
  EXPECT_TRUE(info.multi_process());
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
}

TEST(LaunchEnv, OpenMpiWinsOverSlurm) {
  EnvGuard g(
      {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}});
  EXPECT_EQ(dist::detect_launch().launcher, dist::Launcher::OpenMPI);
  EXPECT_EQ(dist::detect_launch().world_size, 2);
}

TEST(LaunchEnv, ReadsSlurmWithCompressedTasksPerNode) {
  // 2(x3),1: nodes 0..2 run 2 tasks, node 3 runs 1.
  EnvGuard g({{"SLURM_STEP_ID", "0"},
              {"SLURM_PROCID", "6"},
              {"SLURM_NTASKS", "7"},
              {"SLURM_LOCALID", "0"},
              {"SLURM_NODEID", "3"},
              {"SLURM_TASKS_PER_NODE", "2(x3),1"}});
  auto info = dist::detect_launch();
  EXPECT_EQ(info.launcher, dist::Launcher::Slurm);
  EXPECT_EQ(info.rank, 6);
  EXPECT_EQ(info.world_size, 7);
  EXPECT_EQ(info.local_world_size, 1);
}

TEST(LaunchEnv, SlurmWithOneTaskIsNotAJob) {
  // srun -n 1: one task is a world of one; no MPI needed.
  EnvGuard g({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_FALSE(dist::detect_launch().multi_process());
}

TEST(LaunchEnv, SlurmBatchShellIsNotATask) {
  // The shell of `sbatch -n 2` (or salloc) has SLURM_PROCID=0 and SLURM_NTASKS=2 but no step: a
  // program it starts without srun is one process, not rank 0 of 2 (which would wait for a rank 1
  // that never comes). The variables as Slurm 22.05's batch step sets them.
  EnvGuard g({{"SLURM_JOB_ID", "1"},
              {"SLURM_PROCID", "0"},
              {"SLURM_LOCALID", "0"},
              {"SLURM_NTASKS", "2"},
              {"SLURM_TASKS_PER_NODE", "2"}});
  EXPECT_EQ(dist::detect_launch().launcher, dist::Launcher::None);
  EXPECT_FALSE(dist::detect_launch().multi_process());
}

TEST(LaunchEnv, ReadsSlurmTaskOfAStep) {
  // A task that srun started: the step's variables, as srun -n 2 sets them for task 1.
  EnvGuard g({{"SLURM_JOB_ID", "1"},
              {"SLURM_STEP_ID", "0"},
              {"SLURM_STEPID", "0"},
              {"SLURM_PROCID", "1"},
              {"SLURM_LOCALID", "1"},
              {"SLURM_NODEID", "0"},
              {"SLURM_NTASKS", "2"},
              {"SLURM_TASKS_PER_NODE", "2"}});
  auto info = dist::detect_launch();
  EXPECT_EQ(info.launcher, dist::Launcher::Slurm);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
}

TEST(LaunchEnv, PmixRankAloneMeansALauncher) {
  EnvGuard g({{"PMIX_RANK", "3"}});
  auto info = dist::detect_launch();
  EXPECT_EQ(info.launcher, dist::Launcher::PMIx);
  EXPECT_EQ(info.rank, 3);
  EXPECT_TRUE(info.multi_process());
}

TEST(LaunchEnv, MalformedValueNamesTheVariable) {
  EnvGuard g({{"OMPI_COMM_WORLD_SIZE", "two"}});
  try {
    dist::detect_launch();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_SIZE='two'"), std::string::npos) << e.what();
  }
}

// Launcher variables are exact decimal integers in range: no "1e3", "0x10", spaces, signs on counts,
// wrap-around of huge values or a world of zero; the message names the variable and the value.
TEST(LaunchEnv, IntegersAreExactAndRangeChecked) {
  for (const char* bad :
       {"1e3", "0x10", " 4", "4 ", "4.0", "-1", "+-1", "99999999999999999999", "3000000000", "0", ""}) {
    EnvGuard g({{"OMPI_COMM_WORLD_SIZE", bad}, {"OMPI_COMM_WORLD_RANK", "0"}});
    if (*bad == '\0') {
      EXPECT_EQ(dist::detect_launch().launcher, dist::Launcher::None);  // empty is unset
      continue;
    }
    try {
      dist::detect_launch();
      ADD_FAILURE() << "OMPI_COMM_WORLD_SIZE='" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("OMPI_COMM_WORLD_SIZE='") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  {
    EnvGuard g({{"OMPI_COMM_WORLD_SIZE", "+4"}, {"OMPI_COMM_WORLD_RANK", "3"}});
    EXPECT_EQ(dist::detect_launch().world_size, 4);
  }
  {
    EnvGuard g({{"SLURM_STEP_ID", "0"},
                {"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "4"},
                {"SLURM_NODEID", "0"},
                {"SLURM_TASKS_PER_NODE", "2x(3)"}});
    EXPECT_THROW(dist::detect_launch(), Error);
  }
  for (const char* bad : {"2(x3", "2(x3)junk", "1e3", "2(x99999999999)", "0", "2,,1"}) {
    EnvGuard g({{"SLURM_STEP_ID", "0"},
                {"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "4"},
                {"SLURM_NODEID", "1"},
                {"SLURM_TASKS_PER_NODE", bad}});
    EXPECT_THROW(dist::detect_launch(), Error) << bad;
  }
}

TEST(LaunchEnv, RankBeyondWorldIsAnError) {
  EnvGuard g({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}});
  EXPECT_THROW(dist::detect_launch(), Error);
}

TEST(Algorithms, NamesRoundTrip) {
  EXPECT_EQ(dist::algorithm_from_name("mpi"), dist::Algorithm::Backend);
  EXPECT_EQ(dist::algorithm_from_name("ring"), dist::Algorithm::Ring);
  EXPECT_EQ(dist::algorithm_from_name("rhd"), dist::Algorithm::Rhd);
  EXPECT_EQ(dist::algorithm_from_name("tree"), dist::Algorithm::Tree);
  try {
    dist::algorithm_from_name("butterfly");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'butterfly'"), std::string::npos);
  }
}

// BRISK_DEBUG takes every boolean spelling (TRUE used to leave debug off) and refuses other words.
TEST(LaunchEnv, DebugVariableTakesEveryBooleanSpelling) {
  const char* old = std::getenv("BRISK_DEBUG");
  const std::string saved = old ? old : "";
  for (const char* on : {"TRUE", "true", "1", "yes", "on", "On"}) {
    setenv("BRISK_DEBUG", on, 1);
    EXPECT_TRUE(dist::fake_group(2)->debug()) << on;
  }
  for (const char* off : {"FALSE", "0", "no", "off", ""}) {
    setenv("BRISK_DEBUG", off, 1);
    EXPECT_FALSE(dist::fake_group(2)->debug()) << off;
  }
  setenv("BRISK_DEBUG", "verbose", 1);
  try {
    dist::fake_group(2);
    ADD_FAILURE() << "BRISK_DEBUG=verbose was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BRISK_DEBUG='verbose'"), std::string::npos) << e.what();
  }
  if (old)
    setenv("BRISK_DEBUG", saved.c_str(), 1);
  else
    unsetenv("BRISK_DEBUG");
}
