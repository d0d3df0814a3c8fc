// brisk_test_bad_rank: ranks that misbehave in the ways a multi-process test must catch, run
// through brisk_test_job to prove it does. Rank 0 always prints the success line and exits 0;
// rank 1 (OMPI_COMM_WORLD_RANK, else 0):
//   fail    exits 1 a moment later
//   hang    never ends
//   orphan  starts a child in a session of its own that outlives the job, then exits 0
//   good    exits 0 (the control case)
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s fail|hang|orphan|good\n", argv[0]);
    return 2;
  }
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  const int rank = r ? std::atoi(r) : 0;
  const char* mode = argv[1];
  if (rank == 0) {
    std::printf("PASS bad_rank %s rank 0\n", mode);
    std::fflush(stdout);
    return 0;
  }
  if (std::strcmp(mode, "fail") == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::fprintf(stderr, "rank %d: failing on purpose\n", rank);
    return 1;
  }
  if (std::strcmp(mode, "hang") == 0) {
    for (;;) pause();
  }
  if (std::strcmp(mode, "orphan") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      // A daemon: its own session and process group, stdio on /dev/null (so the launcher
      // does not wait for it); only the job's token, inherited, gives it away.
      setsid();
      signal(SIGHUP, SIG_IGN);
      const int null = open("/dev/null", O_RDWR);
      for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
      std::this_thread::sleep_for(std::chrono::seconds(120));
      _exit(0);
    }
    std::printf("rank %d: left child %d behind\n", rank, static_cast<int>(pid));
    return 0;
  }
  if (std::strcmp(mode, "good") == 0) return 0;
  std::fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
