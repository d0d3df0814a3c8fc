// A tiny program for the `brisk launch` tests: prints what this rank sees, then rank FAIL_RANK
// exits with CODE at once while the others sleep SLEEP seconds (the launcher should stop them).
// usage: brisk_test_rank_exit FAIL_RANK CODE SLEEP   (FAIL_RANK -1: nobody fails)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s FAIL_RANK CODE SLEEP\n", argv[0]);
    return 2;
  }
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "(unset)";
  };
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  int rank = r ? std::atoi(r) : 0;
  std::printf("rank %d of %s: BRISK_MIXED_PRECISION=%s BRISK_LAUNCHED=%s\n", rank, env("OMPI_COMM_WORLD_SIZE"),
              env("BRISK_MIXED_PRECISION"), env("BRISK_LAUNCHED"));
  std::fflush(stdout);
  if (rank == std::atoi(argv[1])) return std::atoi(argv[2]);
  std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(argv[3])));
  return 0;
}
