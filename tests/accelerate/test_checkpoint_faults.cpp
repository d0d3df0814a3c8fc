// Saves that do not finish: a child process that saves checkpoints (accelerator_worker
// save_loop) is killed with SIGKILL at random points, or runs out of room (a file size limit,
// RLIMIT_FSIZE); the previous checkpoint must always stay loadable, and a full disk must give a
// clear error.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "accelerate/checkpoint_util.h"

using namespace brisk;
using namespace brisk::testing;

#ifndef BRISK_ACCELERATOR_WORKER
#error "BRISK_ACCELERATOR_WORKER must name the accelerator_worker program"
#endif

namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;  // the read end of its stdout + stderr
};

// Starts accelerator_worker save_loop; `fsize_limit` > 0 caps the size of every file it writes
// once it has loaded (its --file_size_limit).
Child spawn(const fs::path& out, int64_t saves, bool fixed, std::vector<std::string> env = {}, rlim_t fsize_limit = 0) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  std::vector<std::string> args = {BRISK_ACCELERATOR_WORKER, "save_loop", "--out", out.string(), "--saves",
                                   std::to_string(saves)};
  if (fixed) args.emplace_back("--fixed");
  if (fsize_limit > 0) {  // applied by the worker itself once it is running
    args.emplace_back("--file_size_limit");
    args.emplace_back(std::to_string(fsize_limit));
  }
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    for (std::string& e : env) ::putenv(e.data());
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

// Reads the child's output until `line_start` appears (true) or it ends (false).
bool wait_for(Child& c, const std::string& line_start, std::string& seen) {
  char buf[4096];
  for (;;) {
    if (seen.find(line_start) != std::string::npos) return true;
    struct pollfd p = {c.out, POLLIN, 0};
    if (::poll(&p, 1, 30000) <= 0) return false;
    const ssize_t n = ::read(c.out, buf, sizeof buf);
    if (n <= 0) return false;
    seen.append(buf, static_cast<size_t>(n));
  }
}

// Waits for the child; returns its wait status and appends the rest of its output.
int finish(Child& c, std::string& seen) {
  char buf[4096];
  ssize_t n;
  while ((n = ::read(c.out, buf, sizeof buf)) > 0) seen.append(buf, static_cast<size_t>(n));
  ::close(c.out);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  return status;
}

// What a checkpoint holds: the child's micro-step count ("done"), checked by loading it as the
// child would (the same objects prepared).
int64_t load_done(const fs::path& out, bool fixed) {
  SaveLoopRun run(out.string());
  run.done = -1;
  run.acc.load_state(fixed ? (out / "fixed").string() : "");
  return run.done;
}

}  // namespace

// 120 trials: 60 per layout (numbered checkpoint_<n> with total_limit, and one folder replaced
// again and again): the child resumes, saves in a loop and is killed at a random moment; half of the
// kills are timed, half come from the child itself right after its k-th file (k random), so
// every step of a save is hit. After each kill the newest complete checkpoint loads, and it is
// never older than the one before the kill.
// With async_save (BRISK_ASYNC_SAVE=1 in the child) the kills fall inside the background writes.
void kill_while_saving(bool async) {
  const std::vector<std::string> mode = {async ? "BRISK_ASYNC_SAVE=1" : "BRISK_ASYNC_SAVE=0"};
  for (bool fixed : {false, true}) {
    const fs::path out = fresh_folder(std::string(fixed ? "kill_fixed" : "kill_numbered") + (async ? "_async" : ""));
    {
      Child c = spawn(out, 1, fixed, mode);
      std::string seen;
      const int status = finish(c, seen);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << seen;
    }
    int64_t last = load_done(out, fixed);
    ASSERT_EQ(last, 1);
    std::mt19937_64 rng(fixed ? 7 : 8);
    int killed_mid_save = 0;
    for (int trial = 0; trial < 60; ++trial) {
      const bool by_hook = trial % 2 == 1;
      const int k = 1 + static_cast<int>(rng() % 8);  // files written before the kill
      std::vector<std::string> env = mode;
      if (by_hook) env.push_back("BRISK_TEST_CHECKPOINT_KILL_AFTER_FILES=" + std::to_string(k));
      Child c = spawn(out, 0, fixed, env);
      std::string seen;
      ASSERT_TRUE(wait_for(c, "ready", seen)) << "trial " << trial << ": " << seen;
      if (!by_hook) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
        ::kill(c.pid, SIGKILL);
      }
      const int status = finish(c, seen);
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "trial " << trial << ": " << seen;
      int64_t now = -1;
      try {
        now = load_done(out, fixed);
      } catch (const Error& e) {
        FAIL() << "trial " << trial << (fixed ? " (fixed folder)" : " (numbered)") << ", killed "
               << (by_hook ? "after file " + std::to_string(k) : std::string("at a random time"))
               << ": the previous checkpoint does not load: " << e.what();
      }
      EXPECT_GE(now, last) << "trial " << trial;
      killed_mid_save += now == last;
      last = now;
    }
    EXPECT_GT(killed_mid_save, 0) << "no kill fell inside a save";
  }
}

TEST(CheckpointFaults, ASaveKilledAtAnyPointLeavesThePreviousCheckpointLoadable) {
  kill_while_saving(false);
}

TEST(CheckpointFaults, AnAsyncSaveKilledAtAnyPointLeavesThePreviousCheckpointLoadable) {
  kill_while_saving(true);
}

// A full disk (here: a file size limit) makes save_state fail with an error that says so; the
// previous checkpoint stays complete and loadable, and no partial folder is left behind.
// With async_save the write fails on the background thread: the error comes when the program ends
// (the Accelerator's destructor waits for the save), with status 1.
void disk_full(bool async) {
  const std::vector<std::string> mode = {async ? "BRISK_ASYNC_SAVE=1" : "BRISK_ASYNC_SAVE=0"};
  for (bool fixed : {false, true}) {
    const fs::path out = fresh_folder(std::string(fixed ? "full_fixed" : "full_numbered") + (async ? "_async" : ""));
    {
      Child c = spawn(out, 1, fixed);
      std::string seen;
      const int status = finish(c, seen);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << seen;
    }
    // Limits that stop the save at different files (rank_0.json ~200 bytes, the model ~560, the
    // optimizer ~1,100 after its first step).
    for (rlim_t limit : {rlim_t{1}, rlim_t{100}, rlim_t{250}, rlim_t{600}, rlim_t{1000}}) {
      Child c = spawn(out, 1, fixed, mode, limit);
      std::string seen;
      const int status = finish(c, seen);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << "limit " << limit << ": " << seen;
      EXPECT_NE(seen.find("Accelerator::save_state: writing '"), std::string::npos) << seen;
      EXPECT_NE(seen.find("the disk is full or a file size limit was reached"), std::string::npos) << seen;
      EXPECT_EQ(load_done(out, fixed), 1) << "limit " << limit;
      for (const auto& e : fs::recursive_directory_iterator(out))
        EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos)
            << "left behind: " << e.path() << " (limit " << limit << ")";
    }
  }
}

TEST(CheckpointFaults, ADiskFullSaveFailsClearlyAndKeepsThePreviousCheckpoint) {
  disk_full(false);
}

TEST(CheckpointFaults, ADiskFullAsyncSaveFailsClearlyAtTheEndAndKeepsThePreviousCheckpoint) {
  disk_full(true);
}
