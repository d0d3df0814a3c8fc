// The flat YAML reader/writer behind brisk's config file.
#include <brisk/accelerate/yaml.h>
#include <brisk/core/error.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace yaml = brisk::accelerate::yaml;
using Kind = yaml::Value::Kind;

namespace {
std::string error_of(const std::string& text) {
  try {
    yaml::parse(text, "cfg.yaml");
  } catch (const brisk::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Yaml, ReadsScalarKindsAsYamlCoreSchemaDoes) {
  auto doc = yaml::parse("a: 3\nb: -2.5e3\nc: true\nd: null\ne: ~\nf:\ng: hello world\nh: 0,1\ni: .inf\n", "t");
  ASSERT_EQ(doc.size(), 9u);
  EXPECT_EQ(doc[0].second.kind, Kind::Int);
  EXPECT_EQ(doc[0].second.as_int("a"), 3);
  EXPECT_EQ(doc[1].second.kind, Kind::Float);
  EXPECT_DOUBLE_EQ(doc[1].second.as_double("b"), -2500.0);
  EXPECT_EQ(doc[2].second.kind, Kind::Bool);
  EXPECT_TRUE(doc[2].second.as_bool("c"));
  EXPECT_TRUE(doc[3].second.is_null());
  EXPECT_TRUE(doc[4].second.is_null());
  EXPECT_TRUE(doc[5].second.is_null());
  EXPECT_EQ(doc[6].second.as_string("g"), "hello world");
  EXPECT_EQ(doc[7].second.kind, Kind::String);
  EXPECT_EQ(doc[7].second.as_string("h"), "0,1");
  EXPECT_TRUE(std::isinf(doc[8].second.as_double("i")));
}

TEST(Yaml, SkipsCommentsBlankLinesAndDocumentStart) {
  auto doc = yaml::parse("---\n# a comment\n\n  # indented comment\nkey: value  # trailing\nurl: a#b\n", "t");
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[0].second.text, "value");
  EXPECT_EQ(doc[1].second.text, "a#b");  // '#' starts a comment only after a space
  EXPECT_EQ(doc[0].second.line, 5);
}

TEST(Yaml, ReadsQuotedStringsWithEscapes) {
  auto doc = yaml::parse("a: 'no'\nb: 'it''s'\nc: \"tab\\there \\\"q\\\"\"  # c\nd: ''\n", "t");
  EXPECT_EQ(doc[0].second.kind, Kind::String);
  EXPECT_EQ(doc[0].second.text, "no");
  EXPECT_EQ(doc[1].second.text, "it's");
  EXPECT_EQ(doc[2].second.text, "tab\there \"q\"");
  EXPECT_EQ(doc[3].second.kind, Kind::String);
  EXPECT_EQ(doc[3].second.text, "");
}

TEST(Yaml, ReadsYesNoAsStringsButConvertsThemToBoolWhenAsked) {
  auto doc = yaml::parse("mixed_precision: no\nuse_cpu: yes\n", "t");
  EXPECT_EQ(doc[0].second.as_string("mixed_precision"), "no");
  EXPECT_FALSE(doc[0].second.as_bool("x"));
  EXPECT_TRUE(doc[1].second.as_bool("use_cpu"));
}

TEST(Yaml, ConversionErrorsNameTheKeyAndTheText) {
  auto doc = yaml::parse("n: two\n", "t");
  try {
    doc[0].second.as_int("cfg.yaml:1: num_processes");
    FAIL() << "expected brisk::Error";
  } catch (const brisk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_processes: expected an integer, got 'two'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(doc[0].second.as_bool("x"), brisk::Error);
  EXPECT_THROW(yaml::parse("n: 99999999999999999999\n", "t")[0].second.as_int("n"), brisk::Error);
}

TEST(Yaml, RoundTripsEveryKindAndAwkwardStrings) {
  yaml::Document doc = {
      {"n", yaml::Value::null()},
      {"b", yaml::Value::boolean(false)},
      {"i", yaml::Value::integer(-42)},
      {"f", yaml::Value::number(0.1)},
      {"g", yaml::Value::number(2.0)},
      {"s1", yaml::Value::string("no")},
      {"s2", yaml::Value::string("3")},
      {"s3", yaml::Value::string("")},
      {"s4", yaml::Value::string("a: b")},
      {"s5", yaml::Value::string("it's # not a comment")},
      {"s6", yaml::Value::string("two\nlines\t\"x\"")},
      {"s7", yaml::Value::string("true")},
      {"s8", yaml::Value::string("plain/path_1.yaml")},
      {"s9", yaml::Value::string(" padded ")},
  };
  std::string text = yaml::write(doc, "header line\nsecond");
  EXPECT_EQ(text.rfind("# header line\n# second\n", 0), 0u) << text;
  EXPECT_NE(text.find("s1: 'no'\n"), std::string::npos) << text;  // as Accelerate writes it
  EXPECT_NE(text.find("s8: plain/path_1.yaml\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g: 2.0\n"), std::string::npos) << text;
  yaml::Document back = yaml::parse(text, "t");
  ASSERT_EQ(back.size(), doc.size());
  for (size_t i = 0; i < doc.size(); ++i) {
    EXPECT_EQ(back[i].first, doc[i].first);
    EXPECT_EQ(back[i].second, doc[i].second) << doc[i].first << ": '" << back[i].second.text << "'";
  }
  EXPECT_DOUBLE_EQ(back[3].second.as_double("f"), 0.1);
}

TEST(Yaml, RejectsWhatItDoesNotSupportNamingTheLine) {
  EXPECT_NE(error_of("a: 1\nb:\n  c: 2\n").find("cfg.yaml:3: indented line"), std::string::npos);
  EXPECT_NE(error_of("- a\n").find("cfg.yaml:1: lists are not supported"), std::string::npos);
  EXPECT_NE(error_of("a: [1, 2]\n").find("not supported"), std::string::npos);
  EXPECT_NE(error_of("a: 1\na: 2\n").find("cfg.yaml:2: duplicate key 'a' (first on line 1)"), std::string::npos);
  EXPECT_NE(error_of("a:1\n").find("expected a space after 'a:'"), std::string::npos);
  EXPECT_NE(error_of("a: 'open\n").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("a: 'x' y\n").find("unexpected text"), std::string::npos);
  EXPECT_NE(error_of("just text\n").find("expected `key: value`"), std::string::npos);
  EXPECT_NE(error_of("a: &anchor 1\n").find("anchors"), std::string::npos);
}

// The duplicate-key check was quadratic (every key compared with all before it): 200,000 keys took
// minutes. It is a hash lookup now; the bound is far above the linear time even on a loaded machine.
TEST(Yaml, ManyKeysParseInLinearTime) {
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "key_" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  const auto start = std::chrono::steady_clock::now();
  const yaml::Document doc = yaml::parse(text, "big.yaml");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(doc.size(), 200000u);
  EXPECT_EQ(doc.back().second.text, "199999");
  EXPECT_LT(seconds, 10.0);
  EXPECT_NE(error_of(text + "key_7: 1\n").find("cfg.yaml:200001: duplicate key 'key_7' (first on line 8)"),
            std::string::npos);
}

TEST(Yaml, AcceptsWindowsLineEndings) {
  auto doc = yaml::parse("a: 1\r\nb: x\r\n", "t");
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[1].second.text, "x");
}
