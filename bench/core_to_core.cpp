// How long a cache line takes to go from one core to another and back: two threads, pinned to
// two CPUs, hand a counter to each other through one atomic (a round trip = two transfers of
// the line). On one chip whose cores share a cache this is ~100 ns; between dies or sockets, or
// on a VM whose host has put its vCPUs far apart, several times that. The 2-thread speed of a
// training step depends on it (the threads pass activations and gradients to each other every
// op), so bench/thread_scaling.sh prints it beside each pair of runs.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: core_to_core [--cpus A,B] [--trips N] [--repeats R]\n"
               "Round-trip time of a cache line between two CPUs (two pinned threads bouncing a counter).\n"
               "  --cpus A,B    the two CPUs (default: the first two of this process's affinity mask)\n"
               "  --trips N     round trips per measurement (default 200000)\n"
               "  --repeats R   measurements; the median is printed (default 5)\n");
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Nanoseconds per round trip between CPUs a and b, over `trips` round trips.
double measure(int a, int b, long trips) {
  alignas(64) std::atomic<long> flag{0};
  bool pinned_b = false;
  std::thread other([&] {
    pinned_b = pin(b);
    for (long i = 0; i < trips; ++i) {
      while (flag.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      flag.store(2 * i + 2, std::memory_order_release);
    }
  });
  const bool pinned_a = pin(a);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < trips; ++i) {
    flag.store(2 * i + 1, std::memory_order_release);
    while (flag.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  other.join();
  if (!pinned_a || !pinned_b) {
    std::fprintf(stderr, "core_to_core: cannot pin a thread to CPU %d or %d (are both in the affinity mask?)\n", a, b);
    std::exit(1);
  }
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(trips);
}

}  // namespace

int main(int argc, char** argv) {
  int a = -1, b = -1;
  long trips = 200000;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else if (arg == "--cpus" && has_value && std::sscanf(argv[i + 1], "%d,%d", &a, &b) == 2) {
      ++i;
    } else if (arg == "--trips" && has_value && (trips = std::atol(argv[i + 1])) > 0) {
      ++i;
    } else if (arg == "--repeats" && has_value && (repeats = std::atoi(argv[i + 1])) > 0) {
      ++i;
    } else {
      std::fprintf(stderr, "core_to_core: bad argument '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (a < 0 || b < 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
      std::fprintf(stderr, "core_to_core: sched_getaffinity failed: %s\n", std::strerror(errno));
      return 1;
    }
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    if (cpus.size() < 2) {
      std::fprintf(stderr, "core_to_core: this process may run on one CPU only; give it two (taskset) or --cpus\n");
      return 1;
    }
    a = cpus[0];
    b = cpus[1];
  }
  std::vector<double> ns;
  for (int r = 0; r < repeats; ++r) ns.push_back(measure(a, b, trips));
  std::sort(ns.begin(), ns.end());
  std::printf("core-to-core round trip, CPU %d <-> CPU %d: %.0f ns (median of %d; %.0f-%.0f)\n", a, b,
              ns[ns.size() / 2], repeats, ns.front(), ns.back());
  return 0;
}
