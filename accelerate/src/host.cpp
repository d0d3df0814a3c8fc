// Host detection for `brisk launch` and `brisk env`: cores, GPUs, programs on PATH, versions.
#include "brisk/accelerate/host.h"

#include "brisk/dist/process_group.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "brisk/kernels/cuda.h"

namespace brisk::accelerate {

namespace fs = std::filesystem;

namespace {
std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

int usable_cpu_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

int usable_gpu_count() {
  return brisk::cuda::device_count();
}

HostFacts detect_host() {
  return {::geteuid() == 0, usable_cpu_cores(), usable_gpu_count()};
}

std::optional<std::string> capture_output(const std::vector<std::string>& argv, double timeout_seconds) {
  if (argv.empty()) return std::nullopt;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, STDERR_FILENO);
      ::dup2(devnull, STDIN_FILENO);
    }
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

std::string find_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string find_mpirun() {
  const char* override_path = std::getenv("BRISK_MPIRUN");
  if (override_path && *override_path) return find_program(override_path);
  return find_program("mpirun");
}

std::string mpi_version(const std::string& mpirun) {
  if (mpirun.empty()) return "";
  auto out = capture_output({mpirun, "--version"});
  if (!out) return "";
  std::string first = trim(out->substr(0, out->find('\n')));
  // "mpirun (Open MPI) 4.1.4" -> "Open MPI 4.1.4"
  if (auto open = first.find('('), close = first.find(')'); open != std::string::npos && close > open)
    return first.substr(open + 1, close - open - 1) + " " + trim(first.substr(close + 1));
  return first;
}

std::vector<std::string> driver_gpus() {
  std::vector<std::string> gpus;
  if (auto out = capture_output({"nvidia-smi", "-L"})) {
    std::stringstream ss(*out);
    std::string line;
    while (std::getline(ss, line))
      if (!trim(line).empty()) gpus.push_back(trim(line));
    if (!gpus.empty()) return gpus;
  }
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& d : dirs) {
    std::stringstream ss(read_file((d / "information").string()));
    std::string line, model = "unknown model";
    while (std::getline(ss, line))
      if (line.rfind("Model:", 0) == 0) model = trim(line.substr(6));
    gpus.push_back(model + " (bus " + d.filename().string() + ")");
  }
  return gpus;
}

std::string nvidia_driver_version() {
  if (auto out = capture_output({"nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"}))
    return trim(out->substr(0, out->find('\n')));
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..."
  std::string v = read_file("/proc/driver/nvidia/version");
  if (auto k = v.find("Kernel Module"); k != std::string::npos) {
    std::stringstream ss(v.substr(k + 13));
    std::string word;
    ss >> word;
    return word;
  }
  return "";
}

std::string cpu_model() {
  std::stringstream ss(read_file("/proc/cpuinfo"));
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("model name", 0) == 0)
      if (auto colon = line.find(':'); colon != std::string::npos) return trim(line.substr(colon + 1));
  return "";
}

std::string os_description() {
  std::string name;
  std::stringstream ss(read_file("/etc/os-release"));
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      name = trim(line.substr(12));
      if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
    }
  utsname u{};
  if (::uname(&u) == 0) name += (name.empty() ? "" : ", ") + std::string(u.sysname) + " " + u.release;
  return name;
}

std::string cuda_version_string(int code) {
  if (code <= 0) return "";
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

std::string library_version_string(int code) {
  if (code <= 0) return "";
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

namespace {
// `symbol` from a library already in the process, else from the first of `sonames` that loads
// (kept loaded: unloading GPU libraries is not safe).
void* find_symbol(const char* symbol, std::initializer_list<const char*> sonames) {
  if (void* f = ::dlsym(RTLD_DEFAULT, symbol)) return f;
  for (const char* name : sonames)
    if (void* lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL))
      if (void* f = ::dlsym(lib, symbol)) return f;
  return nullptr;
}
}  // namespace

GpuLibraryVersions gpu_library_versions() {
  GpuLibraryVersions v;
  // cublasStatus_t cublasGetProperty(libraryPropertyType, int*): MAJOR_VERSION 0, MINOR 1, PATCH 2.
  using CublasGetProperty = int (*)(int, int*);
  if (auto f = reinterpret_cast<CublasGetProperty>(
          find_symbol("cublasGetProperty", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}))) {
    int major = 0, minor = 0, patch = 0;
    if (f(0, &major) == 0 && f(1, &minor) == 0 && f(2, &patch) == 0)
      v.cublas = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
  using CudnnGetVersion = size_t (*)();
  if (auto f = reinterpret_cast<CudnnGetVersion>(find_symbol("cudnnGetVersion", {"libcudnn.so.9", "libcudnn.so"})))
    v.cudnn = library_version_string(static_cast<int>(f()));
  // The NCCL that libbrisk_dist was linked against (0 in a build without NCCL).
  if (const int code = dist::nccl_version(); code > 0) v.nccl = library_version_string(code);
  return v;
}

std::string executable_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

}  // namespace brisk::accelerate
