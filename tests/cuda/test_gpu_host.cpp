// Decisions that depend on the GPUs of a host, with the GPU count given (so they are checked on
// any machine): which device each process trains on, how many processes `brisk launch` starts
// and whether it needs mpirun, and how `brisk env` writes the CUDA stack's version numbers.
#include <brisk/accelerate/accelerator.h>
#include <brisk/accelerate/host.h>
#include <brisk/accelerate/launch.h>
#include <brisk/util/error.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

using namespace brisk;
using namespace brisk::accelerate;

namespace {
const std::vector<std::string> kProgram{"./train", "--epochs", "1"};
HostFacts host_with_gpus(int gpus) {
  return {.is_root = true, .cpu_cores = 16, .gpu_count = gpus};
}
bool has_pair(const std::vector<std::string>& argv, const std::string& a, const std::string& b) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == a && argv[i + 1] == b) return true;
  return false;
}
}  // namespace

TEST(DeviceSelection, EachProcessOnAHostGetsTheGpuOfItsLocalRank) {
  for (int r = 0; r < 4; ++r) EXPECT_EQ(select_device(false, 4, r, 4), cuda_device(r));
  // Two hosts of two GPUs: local ranks repeat, so do the GPUs.
  EXPECT_EQ(select_device(false, 2, 1, 2), cuda_device(1));
}

TEST(DeviceSelection, CpuFlagOrNoVisibleGpuMeansTheCpu) {
  EXPECT_EQ(select_device(true, 4, 2, 4), kCPU);
  EXPECT_EQ(select_device(false, 0, 3, 4), kCPU);
}

TEST(DeviceSelection, MoreProcessesThanGpusIsAnErrorThatSaysHowToLaunch) {
  try {
    select_device(false, 1, 1, 2);
    FAIL() << "two processes must not silently share one GPU";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("local rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("1 visible"), std::string::npos) << m;
    EXPECT_NE(m.find("--cpu"), std::string::npos) << m;
  }
}

TEST(GpuLaunch, OneGpuHostRunsOneProcessDirectlyWithoutMpirun) {
  LaunchSettings s = resolve_launch({}, host_with_gpus(1));
  EXPECT_EQ(s.num_processes, 1);
  LaunchCommand c = build_launch_command(s, host_with_gpus(1), kProgram, {});
  EXPECT_FALSE(c.uses_mpirun);
  EXPECT_EQ(c.argv, kProgram);
}

TEST(GpuLaunch, EightGpuHostStartsEightProcessesUnderMpirun) {
  LaunchSettings s = resolve_launch({}, host_with_gpus(8));
  EXPECT_EQ(s.num_processes, 8);
  LaunchCommand c = build_launch_command(s, host_with_gpus(8), kProgram, {}, "mpirun");
  EXPECT_TRUE(c.uses_mpirun);
  EXPECT_TRUE(has_pair(c.argv, "-n", "8"));
  EXPECT_EQ(std::find(c.argv.begin(), c.argv.end(), "--oversubscribe"), c.argv.end()) << "16 cores for 8 processes";
}

TEST(GpuLaunch, CpuHostDefaultsToTwoProcessesAndOneProcessStillRunsDirectly) {
  EXPECT_EQ(resolve_launch({}, host_with_gpus(0)).num_processes, 2);
  Config one;
  one.num_processes = 1;
  LaunchSettings s = resolve_launch(one, host_with_gpus(0));
  LaunchCommand c = build_launch_command(s, host_with_gpus(0), kProgram, {});
  EXPECT_FALSE(c.uses_mpirun) << "a machine without OpenMPI can train with -n 1";
}

TEST(GpuLaunch, TheConfigsProcessCountOrCpuWinsOverTheGpuCount) {
  Config configured;
  configured.num_processes = 1;
  EXPECT_EQ(resolve_launch(configured, host_with_gpus(8)).num_processes, 1);
  Config single;
  single.distributed_type = "NO";
  EXPECT_EQ(resolve_launch(single, host_with_gpus(8)).num_processes, 1);
  Config cpu;
  cpu.use_cpu = true;
  EXPECT_EQ(resolve_launch(cpu, host_with_gpus(8)).num_processes, 2);
  Config multi_cpu;
  multi_cpu.distributed_type = "MULTI_CPU";
  EXPECT_EQ(resolve_launch(multi_cpu, host_with_gpus(8)).num_processes, 2);
  Config ids;
  ids.gpu_ids = "2,5,7";
  EXPECT_EQ(resolve_launch(ids, host_with_gpus(8)).num_processes, 3);
}

TEST(GpuLaunch, SeveralMachinesStartOneProcessPerGpuOnEach) {
  Config c;
  c.num_machines = 2;
  c.hostfile = "hosts";
  EXPECT_EQ(resolve_launch(c, host_with_gpus(4)).num_processes, 8);
}

TEST(EnvVersions, CudaVersionsReadAsMajorDotMinor) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(0), "");
}

TEST(EnvVersions, LibraryVersionCodesOfBothSchemesReadAsThreeNumbers) {
  EXPECT_EQ(library_version_string(22809), "2.28.9");   // NCCL 2.28.9
  EXPECT_EQ(library_version_string(91900), "9.19.0");   // cuDNN 9.19.0
  EXPECT_EQ(library_version_string(130100), "13.1.0");  // cuBLAS 13.1.0
  EXPECT_EQ(library_version_string(8907), "8.9.7");     // cuDNN 8.9.7
  EXPECT_EQ(library_version_string(2804), "2.8.4");     // NCCL 2.8.4 (old scheme)
  EXPECT_EQ(library_version_string(0), "");
}
