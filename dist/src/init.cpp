// dist::init: picks the backend from the environment. A plain process gets a world of one
// and never touches MPI; under mpirun / srun the MPI backend is loaded from its own shared
// library (libbrisk_dist_mpi.so) with dlopen, so libbrisk_dist itself does not link libmpi
// and programs built with brisk run on machines without OpenMPI.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "group_impl.h"

namespace brisk::dist {
namespace {

std::unique_ptr<ProcessGroup> g_world;
std::mutex g_world_m;
bool g_atexit_registered = false;

// This library's own folder: the plugin is installed (and built) next to it.
std::string own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&detect_launch), &info) && info.dli_fname) {
    std::string path = info.dli_fname;
    size_t slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash + 1);
  }
  return {};
}

std::unique_ptr<detail::Transport> load_mpi_transport() {
  std::string tried;
  void* lib = nullptr;
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("BRISK_DIST_MPI_LIBRARY"); p && *p) candidates.emplace_back(p);
  candidates.push_back(own_dir() + "libbrisk_dist_mpi.so");
  candidates.emplace_back("libbrisk_dist_mpi.so");
  for (auto& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);  // GLOBAL: OpenMPI's own plugins need libmpi's symbols
    if (lib) break;
    tried += "\n  " + c + ": " + dlerror();
  }
  BRISK_CHECK(lib != nullptr, "dist::init: a launcher started this process (", detect_launch().launcher,
              ") but the MPI backend could not be loaded:", tried,
              "\nInstall OpenMPI (apt install openmpi-bin libopenmpi-dev) and build brisk with it, or run as a "
              "single process without mpirun/srun");
  auto create = reinterpret_cast<detail::CreateTransportFn>(dlsym(lib, detail::kMpiPluginSymbol));
  BRISK_CHECK(create != nullptr, "dist::init: libbrisk_dist_mpi.so has no symbol ", detail::kMpiPluginSymbol);
  char err[1024] = {};
  detail::Transport* t = create(err, sizeof(err));
  BRISK_CHECK(t != nullptr, "dist::init: starting MPI failed: ", err);
  return std::unique_ptr<detail::Transport>(t);
}

}  // namespace

ProcessGroup& init(const InitOptions& options) {
  std::lock_guard lk(g_world_m);
  if (g_world) return *g_world;
  std::string backend = options.backend;
  BRISK_CHECK(backend == "auto" || backend == "mpi" || backend == "self", "dist::init: unknown backend '", backend,
              "' (expected auto, mpi or self)");
  if (backend == "auto") backend = detect_launch().multi_process() ? "mpi" : "self";
  std::unique_ptr<detail::ProcessGroupImpl> impl;
  if (backend == "self") {
    impl = std::make_unique<detail::ProcessGroupImpl>(
        options, [] { return detail::make_self_transport(); }, false);
  } else {
    impl = std::make_unique<detail::ProcessGroupImpl>(
        options, [] { return load_mpi_transport(); }, true);
  }
  g_world = std::make_unique<ProcessGroup>(std::move(impl));
  if (!g_atexit_registered) {
    // A program that returns from main without finalize() must neither hang the other ranks
    // nor be reported as a crash: leave the job properly at exit. A failure status (exit(1),
    // return 3 from main) stops the whole job at once instead, as `brisk launch` promises.
    ::on_exit(
        [](int status, void*) {
          if (status != 0) {
            ProcessGroup* w = nullptr;
            {
              std::lock_guard lk(g_world_m);
              w = g_world.get();
            }
            // (A group already shut down by finalize() has left the job: nothing to stop.)
            if (w && w->size() > 1 && w->backend() != "self" && !w->impl().is_shut_down()) w->impl().abort_job(status);
          }
          finalize();
        },
        nullptr);
    g_atexit_registered = true;
  }
  return *g_world;
}

bool is_initialized() {
  std::lock_guard lk(g_world_m);
  return g_world != nullptr;
}

ProcessGroup& world() {
  std::lock_guard lk(g_world_m);
  BRISK_CHECK(g_world != nullptr, "dist::world: call dist::init() first");
  return *g_world;
}

std::unique_ptr<ProcessGroup> fake_group(int size, int rank, const InitOptions& options) {
  BRISK_CHECK(size >= 1, "dist::fake_group: size must be >= 1, got ", size);
  BRISK_CHECK(rank >= 0 && rank < size, "dist::fake_group: rank ", rank, " is not in [0, ", size, ")");
  auto impl = std::make_unique<detail::ProcessGroupImpl>(
      options, [size, rank] { return detail::make_fake_transport(size, rank); }, /*threaded=*/false, /*fake=*/true);
  return std::make_unique<ProcessGroup>(std::move(impl));
}

std::unique_ptr<ProcessGroup> fake_group(int size, int rank, const InitOptions& options, const FakePeerFaults& faults) {
  BRISK_CHECK(size >= 1, "dist::fake_group: size must be >= 1, got ", size);
  BRISK_CHECK(rank >= 0 && rank < size, "dist::fake_group: rank ", rank, " is not in [0, ", size, ")");
  for (int r : {faults.leaves, faults.mismatches})
    BRISK_CHECK(r < 0 || (r < size && r != rank), "dist::fake_group: the faulty rank ", r,
                " must be another rank of the group (size ", size, ", this rank ", rank, ")");
  auto impl = std::make_unique<detail::ProcessGroupImpl>(
      options, [size, rank, faults] { return detail::make_fake_transport(size, rank, faults); },
      /*threaded=*/true, /*fake=*/true);
  return std::make_unique<ProcessGroup>(std::move(impl));
}

void finalize() {
  std::lock_guard lk(g_world_m);
  if (g_world) g_world->shutdown();
  // The group object stays (shut down) so that handles users still hold remain valid; a
  // later init() in the same process is not supported by MPI anyway.
}

}  // namespace brisk::dist
