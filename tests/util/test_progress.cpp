// ProgressBar's drawing on a terminal: redrawn in place ("\r" + line + erase to the end of the
// line), at most every 100 ms but always when the total is reached, and ended with a newline
// when it closes. The terminal is a pseudo-terminal whose other end the test reads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include <brisk/util/progress.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

using namespace brisk;

namespace {

// Everything the pty's master end can read within `ms` milliseconds of silence.
std::string drain(int master, int ms = 200) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) break;
    ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

TEST(ProgressBar, RedrawsInPlaceOnATerminal) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0) << "no pseudo-terminal available";
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  termios t{};
  ASSERT_EQ(tcgetattr(slave, &t), 0);
  t.c_oflag &= ~static_cast<tcflag_t>(OPOST);  // bytes as written: no "\n" -> "\r\n"
  ASSERT_EQ(tcsetattr(slave, TCSANOW, &t), 0);
  std::FILE* out = fdopen(slave, "w");
  ASSERT_NE(out, nullptr);
  {
    ProgressBar bar(3, "train", "img", true, out);
    bar.update(1, "loss 2.0");  // within 100 ms of the start: not drawn
    EXPECT_EQ(drain(master, 50), "");
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    bar.update(1, "loss 1.5");  // 100 ms later: drawn in place, no newline
    const std::string second = drain(master);
    EXPECT_TRUE(std::regex_match(second, std::regex("\r"
                                                    "train:  66% \\[#{16}\\.{8}\\] 2/3 \\[[0-9.]+s<[0-9.]+s, "
                                                    "[0-9]+\\.[0-9] img/s\\] loss 1\\.5\x1b\\[K")))
        << "'" << second << "'";
    bar.update(1, "loss 1.0");  // the total is reached: drawn at once
    const std::string third = drain(master);
    EXPECT_TRUE(std::regex_match(third, std::regex("\r"
                                                   "train: 100% \\[#{24}\\] 3/3 \\[[0-9.]+s, "
                                                   "[0-9]+\\.[0-9] img/s\\] loss 1\\.0\x1b\\[K")))
        << "'" << third << "'";
  }  // closing draws the final state once more and ends the line
  const std::string last = drain(master);
  EXPECT_TRUE(std::regex_match(last, std::regex("\rtrain: 100% \\[#{24}\\] 3/3 \\[[^\\]]+\\] loss 1\\.0\x1b\\[K\n")))
      << "'" << last << "'";
  std::fclose(out);
  close(master);
}

TEST(ProgressBar, UnknownTotalShowsTheCountAndRate) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(0, "read", "rec", true, f);
    bar.update(7);
  }
  std::rewind(f);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string text(buf, n);
  // Not a terminal, no total: no tenths to mark, so only the final line.
  EXPECT_TRUE(std::regex_match(text, std::regex("read: 7 \\[[0-9.]+s, [0-9]+\\.[0-9] rec/s\\]\n")))
      << "'" << text << "'";
}
