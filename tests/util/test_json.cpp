// The JSON value: parsing every kind of value, exact integers, escapes and UTF-8, errors
// with positions, ordered keys, and compact/pretty output that parses back to the same value.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <brisk/brisk.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include "common/sanitizers.h"

using namespace brisk;
namespace json = brisk::json;

namespace {

std::string parse_error(std::string_view text, json::ParseOptions opt = {}) {
  try {
    json::parse(text, opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Json, ParsesScalarsArraysAndObjects) {
  json::Value v = json::parse(R"( {"n": null, "t": true, "f": false, "i": -12, "d": 2.5e2, "s": "hi",
                                   "a": [1, [2], {}], "o": {"k": "v"}} )");
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_TRUE(v.at("t").as_bool());
  EXPECT_FALSE(v.at("f").as_bool());
  EXPECT_EQ(v.at("i").as_int(), -12);
  EXPECT_TRUE(v.at("i").is_integer());
  EXPECT_DOUBLE_EQ(v.at("d").as_double(), 250.0);
  EXPECT_FALSE(v.at("d").is_integer());
  EXPECT_EQ(v.at("s").as_string(), "hi");
  EXPECT_EQ(v.at("a").size(), 3u);
  EXPECT_EQ(v.at("a")[1][0].as_int(), 2);
  EXPECT_EQ(v.at("o").at("k").as_string(), "v");
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, KeepsIntegersExactUpToUint64) {
  EXPECT_EQ(json::parse("9007199254740993").as_int(), 9007199254740993LL);  // not representable as double
  EXPECT_EQ(json::parse("18446744073709551615").as_uint(), 18446744073709551615ULL);
  EXPECT_EQ(json::parse("-9223372036854775808").as_int(), INT64_MIN);
  EXPECT_FALSE(json::parse("18446744073709551616").is_integer());  // past uint64: a double
  EXPECT_THROW(json::parse("-1").as_uint(), Error);
  EXPECT_THROW(json::parse("1.5").as_int(), Error);
  EXPECT_THROW(json::parse("18446744073709551615").as_int(), Error);
}

TEST(Json, DecodesEscapesAndSurrogatePairs) {
  EXPECT_EQ(json::parse(R"("a\"b\\c\/d\b\f\n\r\t")").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(json::parse(R"("\u00e9\u20ac\ud83d\ude00")").as_string(), "é€😀");
  EXPECT_EQ(json::parse("\"é\"").as_string(), "é");
}

TEST(Json, KeepsObjectKeysInInsertionOrder) {
  json::Value v = json::parse(R"({"z":1,"a":2,"m":3})");
  std::vector<std::string> keys;
  for (auto& [k, x] : v.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(v.dump(), R"({"z":1,"a":2,"m":3})");
}

TEST(Json, BuildsValuesAndDumpsCompactlyLikeSerdeJson) {
  json::Value v;
  v["name"] = "brisk";
  v["step"] = int64_t{3};
  v["lr"] = 1e-3;
  v["one"] = 1.0;
  v["ok"] = true;
  v["list"] = json::Value::array({json::Value(1), json::Value(), json::Value("x\n\x01")});
  EXPECT_EQ(v.dump(), R"({"name":"brisk","step":3,"lr":0.001,"one":1.0,"ok":true,"list":[1,null,"x\n\u0001"]})");
  EXPECT_EQ(json::parse(v.dump()), v);
}

TEST(Json, PrettyPrintsWithIndentAndParsesBack) {
  json::Value v = json::parse(R"({"a":[1,2],"b":{},"c":[]})");
  EXPECT_EQ(v.dump(2), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": []\n}");
  EXPECT_EQ(json::parse(v.dump(2)), v);
}

TEST(Json, DoublesRoundTripExactly) {
  for (double d : {0.1, 1.0 / 3.0, 6.02214076e23, -2.5e-310, 123456789.0}) {
    json::Value v(d);
    EXPECT_EQ(json::parse(v.dump()).as_double(), d) << v.dump();
  }
  EXPECT_EQ(json::Value(std::nan("")).dump(), "null");
}

TEST(Json, ErrorsGiveLineColumnAndByte) {
  EXPECT_NE(parse_error("{\n  \"a\": tru\n}").find("invalid literal (expected true) at line 2, column 8 (byte 9)"),
            std::string::npos)
      << parse_error("{\n  \"a\": tru\n}");
  EXPECT_NE(parse_error("[1, 2").find("unexpected end of input in an array"), std::string::npos);
  EXPECT_NE(parse_error("[1 2]").find("expected ',' or ']' in an array at line 1, column 4"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\" 1}").find("expected ':'"), std::string::npos);
  EXPECT_NE(parse_error("01").find("leading zero"), std::string::npos);
  EXPECT_NE(parse_error("1.").find("expected a digit after '.'"), std::string::npos);
  EXPECT_NE(parse_error("\"abc").find("unterminated string at line 1, column 1"), std::string::npos);
  EXPECT_NE(parse_error("\"a\tb\"").find("unescaped control character"), std::string::npos);
  EXPECT_NE(parse_error(R"("\x")").find("invalid escape"), std::string::npos);
  EXPECT_NE(parse_error(R"("\ud800")").find("unpaired surrogate"), std::string::npos);
  EXPECT_NE(parse_error("\"\xff\"").find("invalid UTF-8 in a string at line 1, column 2"), std::string::npos);
  EXPECT_NE(parse_error("1 2").find("unexpected text after the value"), std::string::npos);
  EXPECT_NE(parse_error("").find("unexpected end of input"), std::string::npos);
  EXPECT_NE(parse_error("1e999").find("number out of range"), std::string::npos);
  EXPECT_NE(parse_error(std::string(600, '[')).find("nesting deeper than 512"), std::string::npos);
}

TEST(Json, DuplicateKeysAreAnErrorUnlessAllowed) {
  EXPECT_NE(parse_error(R"({"a":1,"a":2})").find("duplicate key \"a\" at line 1, column 8"), std::string::npos);
  json::Value v = json::parse(R"({"a":1,"a":2})", {.allow_duplicate_keys = true});
  EXPECT_EQ(v.size(), 2u);
}

TEST(Json, TypedAccessNamesExpectedAndActualTypes) {
  try {
    json::parse("[1]").as_string();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("json: expected string, got array"), std::string::npos);
  }
  EXPECT_THROW(json::parse("{}").at("k"), Error);
  EXPECT_THROW(json::parse("[]")[0], Error);
}

TEST(Json, ValidatesUtf8) {
  size_t at = 0;
  EXPECT_TRUE(json::valid_utf8("plain é € 😀"));
  EXPECT_FALSE(json::valid_utf8("ab\xed\xa0\x80", &at));  // encoded surrogate
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(json::valid_utf8("\xe2\x82", &at));          // truncated
  EXPECT_FALSE(json::valid_utf8("\xf4\x90\x80\x80", &at));  // past U+10FFFF
}

// A 1 MB manifest of 80,000 keys took 22 s when every key was compared with every earlier one;
// sorting makes it milliseconds. The bound below is 100x what a linear check needs even on a
// loaded machine, and far below what the quadratic check took.
TEST(Json, DuplicateKeyCheckOnEightyThousandKeysIsNotQuadratic) {
  std::string text = "{";
  for (int i = 0; i < 80000; ++i) text += (i ? ",\"" : "\"") + std::string("file-") + std::to_string(i) + "\":1";
  text += "}";
  const auto start = std::chrono::steady_clock::now();
  const json::Value v = json::parse(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(v.size(), 80000u);
  EXPECT_LT(seconds, 2.0);
  // A duplicate at the very end is still found, at its own position.
  text.back() = ',';
  text += "\"file-0\":2}";
  const std::string m = parse_error(text);
  EXPECT_NE(m.find("duplicate key \"file-0\""), std::string::npos) << m;
  EXPECT_NE(m.find("(byte " + std::to_string(text.size() - 11) + ")"), std::string::npos) << m;
}

TEST(Json, DuplicateKeysAreReportedInDocumentOrder) {
  EXPECT_NE(parse_error(R"({"b":1,"a":1,"c":1,"a":2,"b":2})").find("duplicate key \"a\" at line 1, column 20"),
            std::string::npos)
      << parse_error(R"({"b":1,"a":1,"c":1,"a":2,"b":2})");
  EXPECT_NE(parse_error(R"({"x":{"k":1,"k":1}})").find("duplicate key \"k\""), std::string::npos);
}

TEST(Json, ReaderWalksValuesWithoutBuildingThem) {
  json::Reader r(R"( {"a": [1, "two", {"x": null}], "b": "s", "c": {"d": true}} )");
  r.begin_object();
  std::vector<std::string> keys;
  std::string key;
  while (r.next_key(key)) {
    keys.push_back(key);
    if (key == "a") {
      r.begin_array();
      ASSERT_TRUE(r.next_element());
      EXPECT_EQ(r.read_value().as_int(), 1);
      ASSERT_TRUE(r.next_element());
      EXPECT_EQ(r.next_type(), json::Type::String);
      EXPECT_EQ(r.read_string(), "two");
      ASSERT_TRUE(r.next_element());
      r.skip_value();
      EXPECT_FALSE(r.next_element());
    } else {
      r.skip_value();
    }
  }
  r.finish();
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b", "c"}));
  json::Reader bad("[1 2]");
  bad.begin_array();
  EXPECT_TRUE(bad.next_element());
  bad.skip_value();
  try {
    bad.next_element();
    FAIL() << "expected brisk::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected ',' or ']' in an array at line 1, column 4"), std::string::npos);
  }
}

// A parsed value costs 40 bytes (one live member), not the ~120 of every member side by side:
// the worst case, 5 million numbers of 2 bytes each, stays under 40 bytes per input byte.
TEST(Json, ParsedValuesCostBoundedMemoryPerInputByte) {
  BRISK_SKIP_MEMORY_MEASUREMENT_UNDER_ASAN();
  static_assert(sizeof(json::Value) <= 40);
  std::string text = "[";
  for (int i = 0; i < 5'000'000; ++i) text += "0,";
  text.back() = ']';
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const long before = u.ru_maxrss;
  const json::Value v = json::parse(text);
  getrusage(RUSAGE_SELF, &u);
  EXPECT_EQ(v.size(), 5'000'000u);
  EXPECT_LT((u.ru_maxrss - before) * 1024.0 / static_cast<double>(text.size()), 40.0) << "bytes per input byte";
  std::cout << "[          ] " << (u.ru_maxrss - before) / 1024 << " MiB for a " << text.size() / 1'000'000
            << " MB array\n";
}
