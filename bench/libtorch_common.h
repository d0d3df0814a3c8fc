// Shared by the libtorch peer programs (bench/libtorch_*.cpp): command-line parsing with exact
// integers, and the BLAS check. libtorch hands its matrix products (linear layers, attention) to
// whatever `sgemm_` the dynamic linker bound it to; on Debian that is the libblas.so.3 alternative,
// which may be the reference (Netlib) BLAS, ~10x slower than OpenBLAS. A comparison against
// libtorch on the reference BLAS measures the wrong thing, so each peer prints which BLAS it runs on
// and refuses the reference one unless told otherwise (--allow-reference-blas).
#pragma once
#include <dlfcn.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

namespace peer {

// What `sgemm_` resolves to in this process.
struct Blas {
  std::string path;  // realpath of the library defining sgemm_
  std::string what;  // "OpenBLAS <config>", "reference BLAS", ...
  bool openblas = false;
  int (*get_threads)() = nullptr;      // openblas_get_num_threads
  void (*set_threads)(int) = nullptr;  // openblas_set_num_threads
};

inline Blas find_blas() {
  Blas b;
  // RTLD_DEFAULT searches the global scope in the same order the dynamic linker used to bind
  // libtorch_cpu's own reference to sgemm_, so this is the sgemm_ libtorch calls.
  void* sym = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info{};
  if (sym == nullptr || dladdr(sym, &info) == 0 || info.dli_fname == nullptr) {
    b.path = "?";
    b.what = "no sgemm_ in the process (libtorch built without BLAS?)";
    return b;
  }
  char real[PATH_MAX];
  b.path = realpath(info.dli_fname, real) != nullptr ? real : info.dli_fname;
  // Look only inside that library and its dependencies (Debian's OpenBLAS libblas.so.3 is a thin
  // front that needs libopenblas.so.0), not in whatever else the process loaded.
  void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  auto find = [&](const char* name) { return h != nullptr ? dlsym(h, name) : nullptr; };
  if (auto cfg = reinterpret_cast<char* (*)()>(find("openblas_get_config"))) {
    b.openblas = true;
    b.get_threads = reinterpret_cast<int (*)()>(find("openblas_get_num_threads"));
    b.set_threads = reinterpret_cast<void (*)(int)>(find("openblas_set_num_threads"));
    const std::string config = cfg();
    b.what = config.rfind("OpenBLAS", 0) == 0 ? config : "OpenBLAS " + config;
  } else if (find("bli_info_get_version_str") != nullptr) {
    b.what = "BLIS";
  } else if (find("mkl_get_max_threads") != nullptr) {
    b.what = "Intel MKL";
  } else if (find("ATL_buildinfo") != nullptr) {
    b.what = "ATLAS";
  } else if (b.path.find("/blas/libblas") != std::string::npos) {
    b.what = "reference BLAS";
  } else {
    b.what = "unrecognised BLAS (no openblas_get_config): treated as reference BLAS";
  }
  if (h != nullptr) dlclose(h);
  return b;
}

// Whole decimal integer in [lo, hi]; anything else (empty, leading blanks or '+', trailing text,
// overflow) is refused.
inline bool parse_int(const char* s, long long lo, long long hi, long long* out) {
  if (s == nullptr || !((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9'))) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

struct Args {
  int steps = 0, threads = 1, batch = 0;
  bool allow_reference_blas = false;
  std::string profile;  // --profile FILE: a Chrome trace of the timed steps (bench/trace_by_op.py sums it)
};

// Parses --steps N --threads T --batch-size B (also --batch_size) --allow-reference-blas
// --profile FILE --help.
// Returns -1 to go on, else the exit code (0 after --help, 2 on a bad command line).
inline int parse_args(const char* prog, const char* usage, int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (f == "--allow-reference-blas") {
      a->allow_reference_blas = true;
      continue;
    }
    if (f == "--profile") {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        std::fprintf(stderr, "%s: --profile needs a file name\n%s", prog, usage);
        return 2;
      }
      a->profile = argv[++i];
      continue;
    }
    int* dst = f == "--steps"                                 ? &a->steps
               : f == "--threads"                             ? &a->threads
               : (f == "--batch-size" || f == "--batch_size") ? &a->batch
                                                              : nullptr;
    if (dst == nullptr) {
      std::fprintf(stderr, "%s: unknown option %s\n%s", prog, f.c_str(), usage);
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n%s", prog, f.c_str(), usage);
      return 2;
    }
    long long v = 0;
    const long long lo = 1, hi = dst == &a->threads ? 1024 : 1 << 24;
    if (!parse_int(argv[i + 1], lo, hi, &v)) {
      std::fprintf(stderr, "%s: %s takes an integer in [%lld, %lld], got '%s'\n", prog, f.c_str(), lo, hi, argv[i + 1]);
      return 2;
    }
    *dst = static_cast<int>(v);
    ++i;
  }
  return -1;
}

// Prints `blas: <path> (<what>)`, refuses anything but OpenBLAS unless allowed, and pins libtorch's
// and OpenBLAS's threads to the budget. Returns -1 to go on, else the exit code.
inline int setup(const char* prog, const Args& a) {
  Blas b = find_blas();
  std::printf("blas: %s (%s)\n", b.path.c_str(), b.what.c_str());
  if (!b.openblas && !a.allow_reference_blas) {
    std::fprintf(stderr,
                 "%s: libtorch's sgemm_ comes from %s, not OpenBLAS: its linear layers would run on a slow "
                 "BLAS and the comparison would be meaningless. Install OpenBLAS (apt-get install libopenblas0; "
                 "Debian then points libblas.so.3 at it), or pass --allow-reference-blas to measure anyway.\n",
                 prog, b.path.c_str());
    return 2;
  }
  torch::set_num_threads(a.threads);
  if (b.set_threads != nullptr) b.set_threads(a.threads);
  std::printf("threads: torch %d, OpenBLAS %s\n", torch::get_num_threads(),
              b.get_threads != nullptr ? std::to_string(b.get_threads()).c_str() : "-");
  std::fflush(stdout);
  return -1;
}

// Records every op run while it lives into a Chrome trace at a.profile (nothing when empty); the
// profiler's own cost slows the run, so timings taken with it are not comparable.
inline std::unique_ptr<torch::autograd::profiler::RecordProfile> maybe_profile(const Args& a) {
  if (a.profile.empty()) return nullptr;
  return std::make_unique<torch::autograd::profiler::RecordProfile>(a.profile);
}

// Drops every gradient, as brisk's zero_grad does by default (set_to_none) and PyTorch's since 2.0;
// libtorch 1.13's Optimizer::zero_grad() fills them with zeros instead, one more pass per step.
inline void zero_grad_to_none(torch::optim::Optimizer& opt) {
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) p.mutable_grad().reset();
}

// main() of a peer program: an exception (libtorch's c10::Error included) ends it with its
// message and exit status 1 rather than std::terminate.
inline int guarded_main(const char* prog, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return 1;
  }
}

}  // namespace peer
