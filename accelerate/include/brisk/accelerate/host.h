// Facts about this machine that decide how a job is launched and what `brisk env` reports:
// CPU cores, GPUs, the user, OpenMPI's mpirun and its version.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace brisk::accelerate {

struct HostFacts {
  bool is_root = false;  // mpirun then needs --allow-run-as-root
  int cpu_cores = 1;     // cores this process may use, as `nproc` counts them
  int gpu_count = 0;     // GPUs this build of brisk can use (0 in a CPU-only build)
};
HostFacts detect_host();

int usable_cpu_cores();  // sched_getaffinity, else hardware_concurrency, at least 1
int usable_gpu_count();  // brisk::cuda::device_count(): honours CUDA_VISIBLE_DEVICES; 0 without CUDA
// GPUs the driver reports whatever the build: `nvidia-smi -L` lines, else the models listed in
// /proc/driver/nvidia/gpus; empty without a driver.
std::vector<std::string> driver_gpus();
std::string nvidia_driver_version();  // empty without a driver
std::string cpu_model();              // /proc/cpuinfo "model name", or empty
std::string os_description();         // /etc/os-release PRETTY_NAME + kernel release

// Runs argv (no shell), returns its stdout (stderr discarded), or nothing when it could not start,
// exited non-zero or ran past `timeout_seconds` (then it is killed).
std::optional<std::string> capture_output(const std::vector<std::string>& argv, double timeout_seconds = 10);
// `name` resolved on PATH (returned as given when it contains '/' and is executable); empty if not found.
std::string find_program(const std::string& name);
// $BRISK_MPIRUN, else mpirun on PATH; empty when there is none.
std::string find_mpirun();
// "Open MPI 4.1.4" from `mpirun --version` (the first line, tidied); empty when it does not run.
std::string mpi_version(const std::string& mpirun);
// Version codes as text. CUDA runtime/driver (1000 * major + 10 * minor): 13000 -> "13.0".
// Libraries (cuBLAS, cuDNN 9, NCCL >= 2.9: 10000 * major + 100 * minor + patch; cuDNN 8 and
// older NCCL: 1000 * major + 100 * minor + patch): 22809 -> "2.28.9", 8907 -> "8.9.7". "" for 0.
std::string cuda_version_string(int code);
std::string library_version_string(int code);
// The GPU libraries' versions as the libraries loaded in this process report them at run time
// (cublasGetProperty, cudnnGetVersion, ncclGetVersion), found among the loaded libraries or
// with dlopen of their usual names; "" for a library that cannot be loaded.
struct GpuLibraryVersions {
  std::string cublas, cudnn, nccl;
};
GpuLibraryVersions gpu_library_versions();

// The folder of the running executable (/proc/self/exe), where brisk looks for brisk-selftest.
std::string executable_dir();

}  // namespace brisk::accelerate
