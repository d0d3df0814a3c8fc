// The shared command-line parser: both spellings, aliases, switches, positionals, errors.
#include <gtest/gtest.h>

#include <brisk/core/cli.h>

using brisk::cli::Parser;

namespace {
struct Args {
  int epochs = 8;
  int64_t batch_size = 64;
  double lr = 1e-3;
  std::string out = "out";
  bool cpu = false;
  int n = 2;
};
Parser make(Args& a) {
  Parser p("prog", "A test program.");
  p.add("epochs", "passes", &a.epochs);
  p.add("batch_size", "per-process batch", &a.batch_size);
  p.add("lr", "learning rate", &a.lr);
  p.add("out", "output folder", &a.out);
  p.add("cpu", "force the CPU", &a.cpu);
  p.add("num_processes", "processes", &a.n, 'n');
  return p;
}
}  // namespace

TEST(Cli, AcceptsBothSpellingsAndBothValueForms) {
  Args a;
  Parser p = make(a);
  const char* argv[] = {"prog", "--batch-size", "32", "--batch_size=16", "--lr=0.5", "--epochs", "3", "-n", "4", "--cpu"};
  ASSERT_TRUE(p.parse(10, argv));
  EXPECT_EQ(a.batch_size, 16);
  EXPECT_EQ(a.lr, 0.5);
  EXPECT_EQ(a.epochs, 3);
  EXPECT_EQ(a.n, 4);
  EXPECT_TRUE(a.cpu);
  EXPECT_TRUE(p.given("batch-size"));
  EXPECT_FALSE(p.given("out"));
}

TEST(Cli, NegatedSwitch) {
  Args a;
  a.cpu = true;
  Parser p = make(a);
  const char* argv[] = {"prog", "--no-cpu"};
  ASSERT_TRUE(p.parse(2, argv));
  EXPECT_FALSE(a.cpu);
}

TEST(Cli, HelpListsEveryFlagWithDefaults) {
  Args a;
  Parser p = make(a);
  std::string h = p.help();
  for (const char* s : {"--epochs", "--batch-size", "(default: 64)", "-n, --num-processes", "--help", "A test program."})
    EXPECT_NE(h.find(s), std::string::npos) << s << " in\n" << h;
  const char* argv[] = {"prog", "--help"};
  testing::internal::CaptureStdout();
  EXPECT_FALSE(p.parse(2, argv));
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(p.exit_code(), 0);
}

TEST(Cli, BadInputFailsWithExitCodeTwoAndAHint) {
  auto run = [](std::vector<const char*> argv) {
    Args a;
    Parser p = make(a);
    testing::internal::CaptureStderr();
    bool ok = p.parse(static_cast<int>(argv.size()), argv.data());
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(ok);
    EXPECT_EQ(p.exit_code(), 2);
    return err;
  };
  EXPECT_NE(run({"prog", "--epochs", "three"}).find("--epochs expects a number, got 'three'"), std::string::npos);
  EXPECT_NE(run({"prog", "--epochs", "2.5"}).find("expects an integer"), std::string::npos);
  EXPECT_NE(run({"prog", "--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(run({"prog", "--lr"}).find("needs a value"), std::string::npos);
  EXPECT_NE(run({"prog", "stray"}).find("unexpected argument 'stray'"), std::string::npos);
  EXPECT_NE(run({"prog", "--cpu=maybe"}).find("true or false"), std::string::npos);
  EXPECT_NE(run({"prog", "--bogus"}).find("--help"), std::string::npos);
}

TEST(Cli, PositionalsStopAtTheProgramLikeALauncher) {
  Args a;
  Parser p = make(a);
  p.allow_positionals("PROGRAM [ARGS...]", /*stop_at_first=*/true);
  const char* argv[] = {"brisk-launch", "-n", "2", "./train", "--epochs", "5"};
  ASSERT_TRUE(p.parse(6, argv));
  EXPECT_EQ(a.n, 2);
  EXPECT_EQ(a.epochs, 8);  // belongs to ./train
  EXPECT_EQ(p.positionals(), (std::vector<std::string>{"./train", "--epochs", "5"}));
}
