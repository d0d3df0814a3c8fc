// `brisk env`: versions, devices and the config in force, as a list to paste into bug reports.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "brisk/accelerate/config.h"
#include "brisk/accelerate/host.h"
#include "brisk/accelerate/launch.h"
#include "brisk/core/cli.h"
#include "brisk/core/error.h"
#include "brisk/version.h"
#include "commands.h"

// Filled by accelerate/CMakeLists.txt from the headers found at build time.
#ifndef BRISK_ENV_CUDA_TOOLKIT
#define BRISK_ENV_CUDA_TOOLKIT ""
#endif
#ifndef BRISK_ENV_CUDNN
#define BRISK_ENV_CUDNN ""
#endif
#ifndef BRISK_ENV_NCCL
#define BRISK_ENV_NCCL ""
#endif
#ifndef BRISK_ENV_EIGEN
#define BRISK_ENV_EIGEN ""
#endif

namespace brisk::cli_commands {

using namespace brisk::accelerate;

namespace {
std::string or_not_found(const std::string& s, const char* why = "not found") { return s.empty() ? why : s; }

std::string memory_total() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kb = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:") {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(kb) / (1024.0 * 1024.0));
      return buf;
    }
    in.ignore(1 << 10, '\n');
  }
  return "";
}
}  // namespace

int env(int argc, char** argv) {
  const std::string me = argv[0];
  cli::Parser p(me,
                "Prints brisk's version and build options, the compiler, CUDA, cuDNN, NCCL and MPI versions,\n"
                "the CPU and GPUs, and the launch config in force, formatted for a bug report.");
  std::string config_file;
  p.add("config_file", "show this config instead of the default one", &config_file);
  if (!p.parse(argc, argv)) return p.exit_code();

  std::ostringstream o;
  o << "- brisk version: " << BRISK_VERSION << "\n"
    << "- Build: " << BRISK_BUILD_TYPE << ", CUDA kernels " << (BRISK_BUILD_WITH_CUDA ? "on" : "off") << "\n"
    << "- Compiler: " << BRISK_COMPILER << ", C++ " << __cplusplus << "\n"
    << "- OpenMP: " << _OPENMP << ", " << omp_get_max_threads()
    << " threads (OMP_NUM_THREADS=" << (std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset")
    << ")\n"
    << "- Eigen: " << or_not_found(BRISK_ENV_EIGEN) << "\n"
    << "- CUDA toolkit (build): "
    << or_not_found(BRISK_ENV_CUDA_TOOLKIT, BRISK_BUILD_WITH_CUDA ? "unknown" : "not used (CPU-only build)") << "\n"
    << "- NVIDIA driver: " << or_not_found(nvidia_driver_version()) << "\n"
    << "- cuDNN (build headers): " << or_not_found(BRISK_ENV_CUDNN) << "\n"
    << "- NCCL (build headers): " << or_not_found(BRISK_ENV_NCCL) << "\n";
  std::string mpirun = find_mpirun();
  o << "- MPI: "
    << (mpirun.empty() ? std::string("not found (apt-get install openmpi-bin)")
                       : or_not_found(mpi_version(mpirun), "mpirun does not report a version") + " (" + mpirun + ")")
    << "\n"
    << "- OS: " << or_not_found(os_description(), "unknown") << "\n"
    << "- CPU: " << or_not_found(cpu_model(), "unknown model") << ", " << usable_cpu_cores() << " cores usable\n"
    << "- Memory: " << or_not_found(memory_total(), "unknown") << "\n";
  std::vector<std::string> gpus = driver_gpus();
  o << "- GPUs (driver): " << (gpus.empty() ? "none found" : std::to_string(gpus.size())) << "\n";
  for (const std::string& g : gpus) o << "  - " << g << "\n";
  o << "- GPUs brisk can use: " << usable_gpu_count() << "\n";
  std::string vars;
  for (const auto& [k, v] : current_environment())
    if (k.rfind("BRISK_", 0) == 0 || k == "CUDA_VISIBLE_DEVICES" || k == "OMP_NUM_THREADS" ||
        k.rfind("OMPI_COMM_WORLD", 0) == 0)
      vars += "  - " + k + "=" + v + "\n";
  o << "- Environment:" << (vars.empty() ? " no BRISK_*, CUDA_VISIBLE_DEVICES or OMP_NUM_THREADS set\n" : "\n" + vars);

  std::string path = config_file.empty() ? default_config_hint() : config_file;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    o << "- Config: none (" << path << " does not exist; `brisk config` writes it)\n";
  } else {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string status = "valid";
    try {
      load_config(path);
    } catch (const brisk::Error& e) {
      status = "INVALID: " + e.message();
    }
    o << "- Config: " << path << " (" << status << ")\n  ```yaml\n";
    std::string line;
    while (std::getline(text, line)) o << "  " << line << "\n";
    o << "  ```\n";
  }
  std::fputs(o.str().c_str(), stdout);
  return 0;
}

}  // namespace brisk::cli_commands
