// One spelling of a boolean and of an integer for every environment variable, config key and flag.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "brisk/util/cli.h"
#include "brisk/util/env.h"
#include "brisk/util/error.h"

#include "common/errors.h"

using namespace brisk;
using brisk::testing::error_of;

namespace {

envvar::Getenv fake(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST(Env, BooleanWordsInAnyCase) {
  for (const char* t : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"})
    EXPECT_EQ(parse_bool_word(t), true) << t;
  for (const char* f : {"0", "false", "FALSE", "no", "No", "off", "OFF"}) EXPECT_EQ(parse_bool_word(f), false) << f;
  for (const char* bad : {"", "2", "tru", "enable", " true", "true ", "y", "n", "truee", "-1", "00"})
    EXPECT_FALSE(parse_bool_word(bad).has_value()) << bad;
}

TEST(Env, BooleanVariables) {
  auto env = fake({{"BRISK_DEBUG", "TRUE"}, {"A", "off"}, {"EMPTY", ""}, {"BAD", "maybe"}});
  EXPECT_TRUE(envvar::get_bool("BRISK_DEBUG", false, env));
  EXPECT_FALSE(envvar::get_bool("A", true, env));
  EXPECT_TRUE(envvar::get_bool("EMPTY", true, env));
  EXPECT_FALSE(envvar::get_bool("UNSET", false, env));
  EXPECT_FALSE(envvar::get_optional_bool("UNSET", env).has_value());
  const std::string msg = error_of([&] { envvar::get_bool("BAD", false, env); });
  EXPECT_NE(msg.find("BAD='maybe'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("true/false"), std::string::npos) << msg;
  EXPECT_NE(msg.find("yes/no"), std::string::npos) << msg;
  EXPECT_NE(msg.find("on/off"), std::string::npos) << msg;
}

TEST(Env, BooleanVariableFromTheRealEnvironment) {
  ::setenv("BRISK_TEST_ENV_BOOL", "True", 1);
  EXPECT_TRUE(envvar::get_bool("BRISK_TEST_ENV_BOOL", false));
  ::setenv("BRISK_TEST_ENV_BOOL", "nope", 1);
  EXPECT_THROW(envvar::get_bool("BRISK_TEST_ENV_BOOL", false), Error);
  ::unsetenv("BRISK_TEST_ENV_BOOL");
}

TEST(Env, IntegersAreExact) {
  EXPECT_EQ(parse_integer<int64_t>("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parse_integer<int64_t>("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parse_integer<uint64_t>("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(parse_integer<uint64_t>("9007199254740993"), 9007199254740993ull);  // 2^53 + 1: no rounding
  EXPECT_EQ(parse_integer<int>("+42"), 42);
  EXPECT_EQ(parse_integer<int>("-0"), 0);
  for (const char* bad : {"", "+", "-", "1e3", "0x10", "1.0", " 1", "1 ", "+-1", "--1", "2147483648", "١"})
    EXPECT_FALSE(parse_integer<int>(bad).has_value()) << bad;
  EXPECT_FALSE(parse_integer<uint64_t>("-1").has_value());
  EXPECT_FALSE(parse_integer<uint64_t>("18446744073709551616").has_value());
  EXPECT_FALSE(parse_integer<uint8_t>("256").has_value());
}

TEST(Env, IntegerVariablesAreRangeChecked) {
  auto env = fake({{"MASTER_PORT", "29500"}, {"P2", "70000"}, {"P3", "1e3"}, {"P4", "0x10"}});
  EXPECT_EQ(envvar::get_int("MASTER_PORT", 1, 1, 65535, env), 29500);
  EXPECT_EQ(envvar::get_int("UNSET", 7, 1, 65535, env), 7);
  for (const char* name : {"P2", "P3", "P4"}) {
    const std::string msg = error_of([&] { envvar::get_int(name, 1, 1, 65535, env); });
    EXPECT_NE(msg.find(std::string(name) + "='"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[1, 65535]"), std::string::npos) << msg;
  }
  const std::string msg = error_of([] { parse_integer_in("12x", 0, 10, "config.yaml: num_processes"); });
  EXPECT_NE(msg.find("config.yaml: num_processes: expected an integer in [0, 10], got '12x'"), std::string::npos)
      << msg;
}

// The command line's switches take the same words as the environment.
TEST(Env, CliSwitchesTakeTheSameBooleanWords) {
  for (const char* word : {"TRUE", "on", "Yes", "1"}) {
    bool flag = false;
    cli::Parser p("prog", "test");
    p.add("cpu", "h", &flag);
    const std::string arg = std::string("--cpu=") + word;
    const char* argv[] = {"prog", arg.c_str()};
    ASSERT_TRUE(p.parse(2, const_cast<char**>(argv))) << word;
    EXPECT_TRUE(flag) << word;
  }
  bool flag = true;
  cli::Parser p("prog", "test");
  p.add("cpu", "h", &flag);
  const char* argv[] = {"prog", "--cpu=OFF"};
  ASSERT_TRUE(p.parse(2, const_cast<char**>(argv)));
  EXPECT_FALSE(flag);
}
