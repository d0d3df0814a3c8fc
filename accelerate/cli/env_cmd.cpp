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
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/linalg.h"
#include "brisk/kernels/settings.h"
#include "brisk/util/cli.h"
#include "brisk/util/error.h"
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
std::string or_not_found(const std::string& s, const char* why = "not found") {
  return s.empty() ? why : s;
}

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
std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// "9.19.0 (build headers 9.19.0)", or what is known when either is missing.
std::string run_and_build(const std::string& run_time, const std::string& build) {
  if (run_time.empty())
    return build.empty() ? std::string("not found") : "cannot be loaded (build headers " + build + ")";
  return build.empty() || build == run_time ? run_time : run_time + " (build headers " + build + ")";
}

// How CPU bf16 matrix products run (kernels::cpu_bf16_dot; docs/how-brisk-works.md), or why the
// setting is unusable.
std::string cpu_bf16_line() {
  try {
    if (kernels::cpu_bf16_dot()) return "bf16 dot-product instructions (AVX512_BF16)";
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
  return kernels::cpu_bf16_dot_available() ? "converted to f32 (BRISK_CPU_BF16_DOT=0)"
                                           : "converted to f32 (this CPU has no AVX512_BF16)";
}

// The instruction set the hot CPU kernels run with, and the choice there was (docs/cpu-isa.md).
std::string cpu_kernels_isa() {
  std::string have;
  for (const std::string& s : kernels::cpu_isas_available()) have += (have.empty() ? "" : ", ") + s;
  std::string isa;
  try {
    isa = kernels::cpu_isa();
  } catch (const Error& e) {
    return std::string("none: ") + e.what();
  }
  if (isa == "native") return "native (built with -march=native for the build machine's CPU)";
  return isa + " (portable build; copies this CPU runs: " + have + "; BRISK_CPU_ISA chooses)";
}

// The GPUs and the CUDA stack, each version as the loaded library reports it.
void gpu_section(std::ostringstream& o) {
  if (!BRISK_BUILD_WITH_CUDA) {
    o << "- GPUs: no GPU (this build of brisk has no CUDA support)\n"
      << "- CUDA: not used (CPU-only build)\n";
  } else {
    const int n = usable_gpu_count();
    if (n == 0) {
      o << "- GPUs: no GPU (none visible: no NVIDIA GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)\n";
    } else {
      o << "- GPUs: " << n << "\n";
      for (int i = 0; i < n; ++i) {
        try {
          const brisk::cuda::DeviceProperties p = brisk::cuda::device_properties(i);
          o << "  - cuda:" << i << ": " << p.name << ", " << gib(p.total_memory) << ", compute capability " << p.major
            << "." << p.minor << ", " << p.multiprocessors << " SMs\n";
        } catch (const brisk::Error& e) {
          o << "  - cuda:" << i << ": cannot be queried: " << e.message() << "\n";
        }
      }
    }
    const brisk::cuda::Versions v = brisk::cuda::versions();
    const std::string driver = nvidia_driver_version();
    o << "- NVIDIA driver: " << or_not_found(driver)
      << (v.driver > 0 ? " (supports CUDA " + cuda_version_string(v.driver) + ")" : std::string()) << "\n"
      << "- CUDA runtime: " << or_not_found(cuda_version_string(v.runtime))
      << (std::string(BRISK_ENV_CUDA_TOOLKIT).empty() ? "" : " (built with toolkit " BRISK_ENV_CUDA_TOOLKIT ")")
      << "\n";
    const GpuLibraryVersions lib = gpu_library_versions();
    o << "- cuBLAS: " << run_and_build(lib.cublas, library_version_string(v.cublas)) << "\n"
      << "- cuDNN: " << run_and_build(lib.cudnn, BRISK_ENV_CUDNN) << "\n"
      << "- NCCL: " << run_and_build(lib.nccl, BRISK_ENV_NCCL) << "\n";
  }
  std::vector<std::string> gpus = driver_gpus();
  o << "- GPUs the driver lists: " << (gpus.empty() ? "none" : std::to_string(gpus.size())) << "\n";
  for (const std::string& g : gpus) o << "  - " << g << "\n";
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
    << "- Build: " << BRISK_BUILD_TYPE << ", "
    << (BRISK_BUILD_WITH_CUDA ? "with CUDA support" : "CPU-only (no CUDA support)") << "\n"
    << "- Compiler: " << BRISK_COMPILER << ", C++ " << __cplusplus << "\n"
    << "- OpenMP: " << _OPENMP << ", " << omp_get_max_threads()
    << " threads (OMP_NUM_THREADS=" << (std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset")
    << ")\n"
    << "- Eigen: " << or_not_found(BRISK_ENV_EIGEN) << "\n"
    << "- CPU GEMM: " << kernels::cpu_gemm_description() << "\n"
    << "- CPU kernels: " << cpu_kernels_isa() << "\n"
    << "- CPU bf16 products: " << cpu_bf16_line() << "\n";
  gpu_section(o);
  std::string mpirun = find_mpirun();
  o << "- MPI: "
    << (mpirun.empty() ? std::string("not found (apt-get install openmpi-bin)")
                       : or_not_found(mpi_version(mpirun), "mpirun does not report a version") + " (" + mpirun + ")")
    << "\n"
    << "- OS: " << or_not_found(os_description(), "unknown") << "\n"
    << "- CPU: " << or_not_found(cpu_model(), "unknown model") << ", " << usable_cpu_cores() << " cores usable\n"
    << "- Memory: " << or_not_found(memory_total(), "unknown") << "\n";
  std::string vars;
  for (const auto& [k, v] : current_environment())
    if (k.rfind("BRISK_", 0) == 0 || k == "CUDA_VISIBLE_DEVICES" || k == "OMP_NUM_THREADS" ||
        k.rfind("OMPI_COMM_WORLD", 0) == 0)
      vars.append("  - ").append(k).append("=").append(v).append("\n");
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
