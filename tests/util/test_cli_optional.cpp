// cli::Parser's optional targets: a flag not given leaves its std::optional empty, so a config
// file (or any later source) can fill what the command line left open.
#include <brisk/util/cli.h>
#include <gtest/gtest.h>

#include <optional>

using brisk::cli::Parser;

TEST(CliOptional, UnsetFlagsStayEmptyAndGivenOnesHoldTheirValue) {
  std::optional<int> n;
  std::optional<double> timeout;
  std::optional<std::string> mp;
  std::optional<bool> cpu;
  Parser p("prog", "test");
  p.add("num_processes", "n", &n, 'n');
  p.add("timeout", "t", &timeout);
  p.add("mixed_precision", "mp", &mp);
  p.add("cpu", "cpu", &cpu);
  const char* argv[] = {"prog", "-n", "4", "--mixed-precision=bf16"};
  ASSERT_TRUE(p.parse(4, argv));
  EXPECT_EQ(n, 4);
  EXPECT_EQ(mp, "bf16");
  EXPECT_FALSE(timeout.has_value());
  EXPECT_FALSE(cpu.has_value());
}

TEST(CliOptional, OptionalSwitchesTakeBothForms) {
  std::optional<bool> cpu;
  Parser p("prog", "test");
  p.add("cpu", "cpu", &cpu);
  const char* on[] = {"prog", "--cpu"};
  ASSERT_TRUE(p.parse(2, on));
  EXPECT_EQ(cpu, true);
  const char* off[] = {"prog", "--no-cpu"};
  ASSERT_TRUE(p.parse(2, off));
  EXPECT_EQ(cpu, false);
}

TEST(CliOptional, BadValuesAreUsageErrorsAndLeaveTheTargetEmpty) {
  std::optional<int> n;
  Parser p("prog", "test");
  p.add("num_processes", "n", &n, 'n');
  const char* argv[] = {"prog", "-n", "two"};
  EXPECT_FALSE(p.parse(3, argv));
  EXPECT_EQ(p.exit_code(), 2);
  EXPECT_FALSE(n.has_value());
}

TEST(CliOptional, HelpShowsNoDefaultForOptionalFlags) {
  std::optional<int> n;
  Parser p("prog", "test");
  p.add("num_processes", "processes", &n, 'n');
  std::string h = p.help();
  EXPECT_NE(h.find("-n, --num-processes VALUE"), std::string::npos) << h;
  EXPECT_EQ(h.find("default"), std::string::npos) << h;
}
