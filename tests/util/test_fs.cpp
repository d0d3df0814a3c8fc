// io::write_file_atomic / AppendFile: the new content or the old file, never half of one, and no
// temporary file left behind; failures name the path and the system's reason.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "brisk/util/error.h"
#include "brisk/util/fs.h"

#include "common/errors.h"

namespace fs = std::filesystem;
using namespace brisk;
using brisk::testing::error_of;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("brisk_fs_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST(Fs, WriteFileAtomicCreatesAndReplaces) {
  TempDir d;
  const std::string p = (d.path / "a.txt").string();
  io::write_file_atomic(p, "first");
  EXPECT_EQ(slurp(p), "first");
  io::write_file_atomic(p, std::string(100000, 'x'));
  EXPECT_EQ(slurp(p), std::string(100000, 'x'));
  io::write_file_atomic(p, "");
  EXPECT_EQ(slurp(p), "");
  EXPECT_EQ(entries(d.path), 1u) << "a temporary file was left behind";
}

TEST(Fs, WriteFileAtomicIntoMissingFolderNamesThePath) {
  TempDir d;
  const std::string p = (d.path / "no_such_dir" / "a.txt").string();
  const std::string msg = error_of([&] { io::write_file_atomic(p, "x", "save_thing"); });
  EXPECT_NE(msg.find("save_thing"), std::string::npos) << msg;
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
}

// A folder nothing can be created in: the old file survives and the error gives the reason.
TEST(Fs, WriteFileAtomicReadOnlyFolderKeepsOldFile) {
  if (::geteuid() == 0) {
    // root ignores the mode bits; procfs refuses new files to everyone.
    const std::string msg = error_of([] { io::write_file_atomic("/proc/self/brisk_fs_test", "x"); });
    EXPECT_NE(msg.find("/proc/self/brisk_fs_test"), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists("/proc/self/brisk_fs_test"));
    return;
  }
  TempDir d;
  const std::string p = (d.path / "a.txt").string();
  io::write_file_atomic(p, "old");
  fs::permissions(d.path, fs::perms::owner_read | fs::perms::owner_exec);
  const std::string msg = error_of([&] { io::write_file_atomic(p, "new"); });
  fs::permissions(d.path, fs::perms::owner_all);
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("Permission denied"), std::string::npos) << msg;
  EXPECT_EQ(slurp(p), "old");
  EXPECT_EQ(entries(d.path), 1u);
}

// A write that fails half-way (the file-size limit, as a full disk would): the previous file is intact,
// the temporary file is removed, and the error says what happened.
TEST(Fs, FailedWriteKeepsOldFileAndRemovesTemp) {
  TempDir d;
  const std::string p = (d.path / "a.bin").string();
  io::write_file_atomic(p, "the old content");
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = error_of([&] { io::write_file_atomic(p, std::string(1 << 20, 'y'), "save_big"); });
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(msg.find("save_big"), std::string::npos) << msg;
  EXPECT_NE(msg.find(p), std::string::npos) << msg;
  EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
  EXPECT_NE(msg.find("previous file is unchanged"), std::string::npos) << msg;
  EXPECT_EQ(slurp(p), "the old content");
  EXPECT_EQ(entries(d.path), 1u) << "the temporary file was left behind";
}

TEST(Fs, RenameOntoAFolderFailsAndCleansUp) {
  TempDir d;
  fs::create_directories(d.path / "target" / "child");
  const std::string msg = error_of([&] { io::write_file_atomic((d.path / "target").string(), "x"); });
  EXPECT_NE(msg.find("cannot replace"), std::string::npos) << msg;
  EXPECT_TRUE(fs::is_directory(d.path / "target" / "child"));
  EXPECT_EQ(entries(d.path), 1u);
}

TEST(Fs, WriteFileSynced) {
  TempDir d;
  const std::string p = (d.path / "s.bin").string();
  io::write_file_synced(p, "abc");
  io::write_file_synced(p, "de");
  EXPECT_EQ(slurp(p), "de");
  EXPECT_NE(
      error_of([&] { io::write_file_synced((d.path / "x" / "y").string(), "a", "who"); }).find("who: cannot create"),
      std::string::npos);
}

TEST(Fs, AppendFileAppendsWithoutRewriting) {
  TempDir d;
  const std::string p = (d.path / "log.jsonl").string();
  {
    io::AppendFile f(p);
    EXPECT_TRUE(f.is_open());
    f.append("1\n");
    f.append("2\n", /*sync=*/false);
    f.sync();
  }
  EXPECT_EQ(slurp(p), "1\n2\n");
  struct stat before {};
  ASSERT_EQ(::stat(p.c_str(), &before), 0);
  {
    io::AppendFile f(p);
    f.append("3\n");
    io::AppendFile g = std::move(f);
    EXPECT_FALSE(f.is_open());  // NOLINT(bugprone-use-after-move): the moved-from state is the test
    g.append("4\n");
    g.close();
    EXPECT_FALSE(g.is_open());
    EXPECT_THROW(g.append("5\n"), Error);
  }
  struct stat after {};
  ASSERT_EQ(::stat(p.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "the file was replaced instead of appended to";
  EXPECT_EQ(slurp(p), "1\n2\n3\n4\n");
  { io::AppendFile f(p, /*truncate=*/true); }
  EXPECT_EQ(slurp(p), "");
  const std::string bad = (d.path / "nope" / "x").string();
  const std::string msg = error_of([&] { io::AppendFile f(bad, false, "tracker"); });
  EXPECT_NE(msg.find("tracker: cannot open '" + bad + "'"), std::string::npos) << msg;
}

TEST(Fs, AppendFailureNamesThePath) {
  TempDir d;
  const std::string p = (d.path / "big.log").string();
  io::AppendFile f(p, false, "log");
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = error_of([&] { f.append(std::string(1000, 'z')); });
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(msg.find("log: appending 1000 bytes to '" + p + "' failed"), std::string::npos) << msg;
}
