// The shared command-line parser: both spellings, aliases, switches, positionals, errors.
#include <gtest/gtest.h>

#include <limits>

#include <brisk/util/cli.h>
#include <brisk/util/error.h>

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
  const char* argv[] = {"prog", "--batch-size", "32", "--batch_size=16", "--lr=0.5", "--epochs", "3", "-n",
                        "4",    "--cpu"};
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
  for (const char* s :
       {"--epochs", "--batch-size", "(default: 64)", "-n, --num-processes", "--help", "A test program."})
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
  EXPECT_NE(
      run({"prog", "--epochs", "three"}).find("--epochs expects an integer in [-2147483648, 2147483647], got 'three'"),
      std::string::npos);
  EXPECT_NE(run({"prog", "--epochs", "2.5"}).find("expects an integer"), std::string::npos);
  EXPECT_NE(run({"prog", "--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(run({"prog", "--lr"}).find("needs a value"), std::string::npos);
  EXPECT_NE(run({"prog", "stray"}).find("unexpected argument 'stray'"), std::string::npos);
  EXPECT_NE(run({"prog", "--cpu=maybe"}).find("true or false"), std::string::npos);
  EXPECT_NE(run({"prog", "--bogus"}).find("--help"), std::string::npos);
}

// A flag with a setter (how enum choices are registered): the setter sees the value, a
// brisk::Error it throws is the usage error word for word, and --help shows the given default.
TEST(Cli, ASetterFlagConvertsTheValueAndItsErrorIsTheUsageError) {
  enum class Shape { Round, Square };
  Shape shape = Shape::Round;
  auto make_parser = [&shape] {
    Parser p("prog", "A test program.");
    p.set_quiet(true);
    p.add(
        "shape", "round or square",
        [&shape](const std::string& v) {
          BRISK_CHECK(v == "round" || v == "square", "--shape: '", v, "' is not valid; expected one of: round, square");
          shape = v == "round" ? Shape::Round : Shape::Square;
        },
        "round");
    return p;
  };
  Parser p = make_parser();
  EXPECT_NE(p.help().find("round or square (default: round)"), std::string::npos) << p.help();
  const char* good[] = {"prog", "--shape", "square"};
  ASSERT_TRUE(p.parse(3, good)) << p.error();
  EXPECT_EQ(shape, Shape::Square);
  Parser q = make_parser();
  const char* bad[] = {"prog", "--shape=oval"};
  EXPECT_FALSE(q.parse(2, bad));
  EXPECT_EQ(q.exit_code(), 2);
  EXPECT_EQ(q.error(), "--shape: 'oval' is not valid; expected one of: round, square");
  EXPECT_EQ(shape, Shape::Square);
}

TEST(Cli, IntegersAreParsedExactlyAndRangeChecked) {
  auto fails = [](const char* flag, const char* value, const char* fragment) {
    int i = 0;
    int64_t l = 0;
    uint64_t u = 0;
    Parser p("prog", "");
    p.add("i", "", &i);
    p.add("l", "", &l);
    p.add("u", "", &u);
    const char* argv[] = {"prog", flag, value};
    testing::internal::CaptureStderr();
    EXPECT_FALSE(p.parse(3, argv)) << flag << " " << value;
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(fragment), std::string::npos) << err;
  };
  fails("--i", "1e10", "expects an integer");  // no floating-point detour
  fails("--i", "1e3", "expects an integer");
  fails("--i", "0x10", "expects an integer");
  fails("--i", "3000000000", "--i is out of range: '3000000000'");
  fails("--i", "-2147483649", "out of range");
  fails("--u", "-1", "expects an integer in [0, 18446744073709551615]");
  fails("--l", "9223372036854775808", "out of range");
  fails("--l", "", "expects an integer");
  fails("--l", "+-3", "expects an integer");
  fails("--l", "12 ", "expects an integer");
  int i = 0;
  int64_t l = 0;
  uint64_t u = 0;
  Parser p("prog", "");
  p.add("i", "", &i);
  p.add("l", "", &l);
  p.add("u", "", &u);
  const char* argv[] = {"prog", "--i", "+2147483647", "--l", "-9223372036854775808", "--u", "18446744073709551615"};
  ASSERT_TRUE(p.parse(7, argv));
  EXPECT_EQ(i, 2147483647);
  EXPECT_EQ(l, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(u, std::numeric_limits<uint64_t>::max()) << "a 64-bit seed above 2^53 is kept exactly";
  const char* seed[] = {"prog", "--u", "9007199254740993"};  // 2^53 + 1: a double would round it
  ASSERT_TRUE(p.parse(3, seed));
  EXPECT_EQ(u, 9007199254740993ull);
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

TEST(CliLists, SplitCommaListDropsEmptyItems) {
  EXPECT_EQ(brisk::cli::split_comma_list("mpi,ring,,rhd,"), (std::vector<std::string>{"mpi", "ring", "rhd"}));
  EXPECT_TRUE(brisk::cli::split_comma_list("").empty());
  EXPECT_EQ(brisk::cli::split_comma_list("jsonl"), (std::vector<std::string>{"jsonl"}));
}
