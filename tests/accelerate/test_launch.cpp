// The command `brisk launch` builds, as a pure function of the settings, the host and the
// launcher's environment: mpirun's options, the variables every rank gets, and the default
// number of processes.
#include <brisk/accelerate/launch.h>
#include <brisk/util/error.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

using namespace brisk::accelerate;

namespace {
const HostFacts kUser{.is_root = false, .cpu_cores = 8, .gpu_count = 0};
const HostFacts kRoot{.is_root = true, .cpu_cores = 2, .gpu_count = 0};
const std::vector<std::string> kProgram{"./train", "--epochs", "3"};

LaunchSettings with_n(int n) {
  LaunchSettings s;
  s.num_processes = n;
  return s;
}
bool has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}
// True when `a` is immediately followed by `b` somewhere in argv.
bool has_pair(const std::vector<std::string>& argv, const std::string& a, const std::string& b) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == a && argv[i + 1] == b) return true;
  return false;
}
const std::string* env_of(const LaunchCommand& c, const std::string& name) {
  for (const auto& [k, v] : c.env)
    if (k == name) return &v;
  return nullptr;
}
}  // namespace

TEST(LaunchCommand, NonRootSingleHostRunsMpirunWithLoopbackTcpAndTheProgramLast) {
  LaunchCommand c = build_launch_command(with_n(4), kUser, kProgram, {}, "/usr/bin/mpirun");
  ASSERT_TRUE(c.uses_mpirun);
  EXPECT_EQ(c.argv.front(), "/usr/bin/mpirun");
  EXPECT_FALSE(has(c.argv, "--allow-run-as-root"));
  EXPECT_FALSE(has(c.argv, "--oversubscribe"));  // 4 processes on 8 cores
  EXPECT_FALSE(has(c.argv, "--hostfile"));
  EXPECT_FALSE(has(c.argv, "--tag-output"));
  EXPECT_TRUE(has_pair(c.argv, "-n", "4"));
  EXPECT_TRUE(has_pair(c.argv, "--bind-to", "none"));
  EXPECT_TRUE(has_pair(c.argv, "btl_tcp_if_include", "lo"));
  EXPECT_TRUE(has_pair(c.argv, "oob_tcp_if_include", "lo"));
  EXPECT_TRUE(has_pair(c.argv, "btl", "self,vader,tcp"));
  ASSERT_GE(c.argv.size(), kProgram.size());
  EXPECT_TRUE(std::equal(kProgram.begin(), kProgram.end(), c.argv.end() - kProgram.size()));
}

// Ranks that wait inside MPI give their core back (their training threads fill the cores);
// the user's own OMPI_MCA_mpi_yield_when_idle decides instead when set.
TEST(LaunchCommand, SingleHostRanksYieldWhenIdleUnlessTheUserSaysOtherwise) {
  EXPECT_TRUE(has_pair(build_launch_command(with_n(2), kUser, kProgram, {}).argv, "mpi_yield_when_idle", "1"));
  EXPECT_FALSE(has(build_launch_command(with_n(2), kUser, kProgram, {{"OMPI_MCA_mpi_yield_when_idle", "0"}}).argv,
                   "mpi_yield_when_idle"));
}

// Large messages go through shared-memory fragments, which check a message's size before they
// copy it, not the single-copy path, which overwrites memory when the ranks' collectives differ;
// the user's own OMPI_MCA_btl_vader_single_copy_mechanism decides instead when set.
TEST(LaunchCommand, RanksCheckAMessagesSizeBeforeCopyingUnlessTheUserSaysOtherwise) {
  EXPECT_TRUE(
      has_pair(build_launch_command(with_n(2), kUser, kProgram, {}).argv, "btl_vader_single_copy_mechanism", "none"));
  EXPECT_FALSE(
      has(build_launch_command(with_n(2), kUser, kProgram, {{"OMPI_MCA_btl_vader_single_copy_mechanism", "cma"}}).argv,
          "btl_vader_single_copy_mechanism"));
}

TEST(LaunchCommand, RootAddsAllowRunAsRoot) {
  LaunchCommand c = build_launch_command(with_n(2), kRoot, kProgram, {});
  EXPECT_TRUE(has(c.argv, "--allow-run-as-root"));
  EXPECT_FALSE(has(c.argv, "--oversubscribe"));  // 2 processes on 2 cores
}

TEST(LaunchCommand, MoreProcessesThanCoresAddsOversubscribe) {
  EXPECT_TRUE(has(build_launch_command(with_n(3), kRoot, kProgram, {}).argv, "--oversubscribe"));
  EXPECT_TRUE(has(build_launch_command(with_n(9), kUser, kProgram, {}).argv, "--oversubscribe"));
  EXPECT_FALSE(has(build_launch_command(with_n(8), kUser, kProgram, {}).argv, "--oversubscribe"));
}

TEST(LaunchCommand, HostfileGoesToMpirunAndLiftsTheLoopbackRestriction) {
  LaunchSettings s = with_n(16);
  s.num_machines = 2;
  s.hostfile = "hosts";
  LaunchCommand c = build_launch_command(s, kUser, kProgram, {});
  EXPECT_TRUE(has_pair(c.argv, "--hostfile", "hosts"));
  EXPECT_FALSE(has(c.argv, "btl_tcp_if_include"));
  EXPECT_FALSE(has(c.argv, "oob_tcp_if_include"));
  EXPECT_FALSE(has(c.argv, "--oversubscribe"));  // the hostfile's slots decide
  EXPECT_EQ(*env_of(c, "BRISK_NUM_MACHINES"), "2");
  EXPECT_EQ(*env_of(c, "OMP_NUM_THREADS"), "1");  // 8 processes per host on 8 cores
}

// Single-host jobs keep OpenMPI's out-of-band and TCP transports and NCCL's bootstrap on loopback;
// a user's own NCCL_SOCKET_IFNAME is kept (and forwarded); a host list lifts all of it.
TEST(LaunchCommand, SingleHostKeepsEverySocketOnLoopback) {
  LaunchCommand c = build_launch_command(with_n(2), kUser, kProgram, {});
  ASSERT_NE(env_of(c, "NCCL_SOCKET_IFNAME"), nullptr);
  EXPECT_EQ(*env_of(c, "NCCL_SOCKET_IFNAME"), "lo");
  EXPECT_TRUE(has_pair(c.argv, "-x", "NCCL_SOCKET_IFNAME"));
  EXPECT_TRUE(has_pair(c.argv, "oob_tcp_if_include", "lo"));
  EXPECT_TRUE(has_pair(c.argv, "btl_tcp_if_include", "lo"));
  // One process runs directly, still told to stay on loopback.
  LaunchCommand one = build_launch_command(with_n(1), kUser, kProgram, {});
  EXPECT_FALSE(one.uses_mpirun);
  EXPECT_EQ(*env_of(one, "NCCL_SOCKET_IFNAME"), "lo");
  // The user's choice wins and travels to every rank.
  LaunchCommand mine = build_launch_command(with_n(2), kUser, kProgram, {{"NCCL_SOCKET_IFNAME", "eth1"}});
  EXPECT_EQ(env_of(mine, "NCCL_SOCKET_IFNAME"), nullptr);
  EXPECT_TRUE(has_pair(mine.argv, "-x", "NCCL_SOCKET_IFNAME"));
  LaunchSettings multi = with_n(16);
  multi.num_machines = 2;
  multi.hostfile = "hosts";
  LaunchCommand m = build_launch_command(multi, kUser, kProgram, {});
  EXPECT_EQ(env_of(m, "NCCL_SOCKET_IFNAME"), nullptr);
  EXPECT_FALSE(has(m.argv, "oob_tcp_if_include"));
}

TEST(LaunchCommand, TagOutputAsksMpirunToPrefixLines) {
  LaunchSettings s = with_n(2);
  s.tag_output = true;
  EXPECT_TRUE(has(build_launch_command(s, kUser, kProgram, {}).argv, "--tag-output"));
  s.num_processes = 1;  // one process still goes through mpirun to get the prefix
  EXPECT_TRUE(build_launch_command(s, kUser, kProgram, {}).uses_mpirun);
}

TEST(LaunchCommand, GpuIdsSetCudaVisibleDevicesForEveryRank) {
  LaunchSettings s = with_n(2);
  s.gpu_ids = {2, 3};
  LaunchCommand c = build_launch_command(s, kUser, kProgram, {});
  ASSERT_NE(env_of(c, "CUDA_VISIBLE_DEVICES"), nullptr);
  EXPECT_EQ(*env_of(c, "CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_TRUE(has_pair(c.argv, "-x", "CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(env_of(build_launch_command(with_n(2), kUser, kProgram, {}), "CUDA_VISIBLE_DEVICES"), nullptr);
}

TEST(LaunchCommand, SettingsBecomeBriskVariablesForwardedWithX) {
  LaunchSettings s = with_n(2);
  s.mixed_precision = "bf16";
  s.use_cpu = true;
  s.timeout = 5;
  s.debug = true;
  s.sharding = "zero2";
  s.config_file = "/c.yaml";
  LaunchCommand c = build_launch_command(s, kUser, kProgram, {{"BRISK_CUSTOM", "x"}, {"HOME", "/root"}});
  EXPECT_EQ(*env_of(c, "BRISK_LAUNCHED"), "1");
  EXPECT_EQ(*env_of(c, "BRISK_MIXED_PRECISION"), "bf16");
  EXPECT_EQ(*env_of(c, "BRISK_CPU"), "1");
  EXPECT_EQ(*env_of(c, "BRISK_TIMEOUT_SECONDS"), "5");
  EXPECT_EQ(*env_of(c, "BRISK_DEBUG"), "1");
  EXPECT_EQ(*env_of(c, "BRISK_SHARDING"), "zero2");
  EXPECT_EQ(*env_of(c, "BRISK_CONFIG_FILE"), "/c.yaml");
  for (const char* name : {"BRISK_LAUNCHED", "BRISK_MIXED_PRECISION", "BRISK_CPU", "BRISK_TIMEOUT_SECONDS",
                           "BRISK_DEBUG", "BRISK_SHARDING", "BRISK_CUSTOM", "OMP_NUM_THREADS"})
    EXPECT_TRUE(has_pair(c.argv, "-x", name)) << name;
  EXPECT_FALSE(has_pair(c.argv, "-x", "HOME"));
}

TEST(LaunchCommand, UnsetSettingsAreNotExported) {
  LaunchCommand c = build_launch_command(with_n(2), kUser, kProgram, {});
  EXPECT_EQ(env_of(c, "BRISK_MIXED_PRECISION"), nullptr);
  EXPECT_EQ(env_of(c, "BRISK_CPU"), nullptr);
  EXPECT_EQ(env_of(c, "BRISK_TIMEOUT_SECONDS"), nullptr);
}

TEST(LaunchCommand, OmpThreadsSplitTheCoresUnlessAlreadySet) {
  EXPECT_EQ(*env_of(build_launch_command(with_n(2), kUser, kProgram, {}), "OMP_NUM_THREADS"), "4");
  EXPECT_EQ(*env_of(build_launch_command(with_n(3), kRoot, kProgram, {}), "OMP_NUM_THREADS"), "1");
  LaunchCommand kept = build_launch_command(with_n(2), kUser, kProgram, {{"OMP_NUM_THREADS", "3"}});
  EXPECT_EQ(env_of(kept, "OMP_NUM_THREADS"), nullptr);
  EXPECT_TRUE(has_pair(kept.argv, "-x", "OMP_NUM_THREADS"));
}

TEST(LaunchCommand, OneProcessRunsTheProgramDirectlyWithoutMpirun) {
  LaunchCommand c = build_launch_command(with_n(1), kRoot, kProgram, {});
  EXPECT_FALSE(c.uses_mpirun);
  EXPECT_EQ(c.argv, kProgram);
  EXPECT_EQ(*env_of(c, "BRISK_LAUNCHED"), "1");
}

TEST(LaunchCommand, ExtraMpirunArgsComeBeforeTheProgram) {
  LaunchSettings s = with_n(2);
  s.mpirun_args = {"--mca", "plm_rsh_agent", "/bin/wrapper"};
  LaunchCommand c = build_launch_command(s, kUser, kProgram, {});
  auto it = std::find(c.argv.begin(), c.argv.end(), "plm_rsh_agent");
  ASSERT_NE(it, c.argv.end());
  EXPECT_LT(it - c.argv.begin(), static_cast<long>(c.argv.size() - kProgram.size()));
}

TEST(LaunchCommand, NoProgramIsAnError) {
  EXPECT_THROW(build_launch_command(with_n(2), kUser, {}, {}), brisk::Error);
}

TEST(LaunchDefaults, ProcessCountComesFromConfigThenGpuIdsThenGpusThenTwo) {
  HostFacts gpus{.is_root = false, .cpu_cores = 16, .gpu_count = 4};
  EXPECT_EQ(resolve_launch({}, kUser).num_processes, 2);
  EXPECT_EQ(resolve_launch({}, gpus).num_processes, 4);
  Config ids;
  ids.gpu_ids = "1,3";
  EXPECT_EQ(resolve_launch(ids, gpus).num_processes, 2);
  EXPECT_EQ(resolve_launch(ids, gpus).gpu_ids, (std::vector<int>{1, 3}));
  Config cpu;
  cpu.use_cpu = true;
  EXPECT_EQ(resolve_launch(cpu, gpus).num_processes, 2);  // GPUs ignored on the CPU
  Config configured;
  configured.num_processes = 3;
  EXPECT_EQ(resolve_launch(configured, gpus).num_processes, 3);
  Config single;
  single.distributed_type = "NO";
  EXPECT_EQ(resolve_launch(single, kUser).num_processes, 1);
}

TEST(LaunchDefaults, ManyMachinesNeedAHostfile) {
  Config c;
  c.num_machines = 2;
  c.num_processes = 4;
  try {
    resolve_launch(c, kUser);
    FAIL() << "expected brisk::Error";
  } catch (const brisk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--hostfile"), std::string::npos) << e.what();
  }
  c.hostfile = "hosts";
  EXPECT_EQ(resolve_launch(c, kUser).hostfile, "hosts");
}

TEST(LaunchDefaults, InvalidMergedSettingsAreRejected) {
  Config c;
  c.mixed_precision = "fp8";
  EXPECT_THROW(resolve_launch(c, kUser), brisk::Error);
}

TEST(ShellJoin, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(shell_join({"mpirun", "-n", "2", "a b", "it's", "X=1"}), "mpirun -n 2 'a b' 'it'\\''s' X=1");
}

TEST(LaunchCommand, MaxRestartsGivesEveryRankTheRestartCountAndZeroChangesNothing) {
  Config c;
  c.num_processes = 2;
  c.max_restarts = 3;
  LaunchSettings s = resolve_launch(c, kUser);
  EXPECT_EQ(s.max_restarts, 3);
  LaunchCommand cmd = build_launch_command(s, kUser, kProgram, {});
  ASSERT_NE(env_of(cmd, "BRISK_RESTART_COUNT"), nullptr);
  EXPECT_EQ(*env_of(cmd, "BRISK_RESTART_COUNT"), "0") << "the first attempt";
  EXPECT_TRUE(has_pair(cmd.argv, "-x", "BRISK_RESTART_COUNT")) << "mpirun passes the value of the moment";
  c.max_restarts.reset();
  EXPECT_EQ(resolve_launch(c, kUser).max_restarts, 0);
  EXPECT_EQ(env_of(build_launch_command(resolve_launch(c, kUser), kUser, kProgram, {}), "BRISK_RESTART_COUNT"),
            nullptr);
  c.max_restarts = -1;
  EXPECT_THROW(validate(c, "flags"), brisk::Error);
}

TEST(LaunchCommand, PreemptGraceDefaultsTo90SecondsAndMustBePositive) {
  Config c;
  c.num_processes = 2;
  EXPECT_EQ(resolve_launch(c, kUser).preempt_grace, 90) << "time for a step and a save before the kill";
  c.preempt_grace = 2.5;
  EXPECT_EQ(resolve_launch(c, kUser).preempt_grace, 2.5);
  EXPECT_EQ(config_from_yaml(config_to_yaml(c), "round trip").preempt_grace, 2.5) << "a config-file key";
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    c.preempt_grace = bad;
    try {
      validate(c, "flags");
      ADD_FAILURE() << "preempt_grace " << bad << " was accepted";
    } catch (const brisk::Error& e) {
      EXPECT_NE(e.message().find("preempt_grace"), std::string::npos) << e.message();
    }
  }
}
