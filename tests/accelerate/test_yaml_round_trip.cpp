// What the YAML writer writes reads back as the same document (issue 35): every class of string
// whose plain or quoted form a reader would take for something else, each read -> write -> read.
#include <brisk/accelerate/config.h>
#include <brisk/accelerate/yaml.h>
#include <brisk/util/error.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/errors.h"

namespace yaml = brisk::accelerate::yaml;
using brisk::testing::error_of;
using Kind = yaml::Value::Kind;

namespace {

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// Writes `doc` (no header comment, so its first key opens the file), reads it back and compares
// (the fuzz target's check); returns the text written.
std::string expect_round_trip(const yaml::Document& doc) {
  std::string once = yaml::write(doc);
  yaml::Document back;
  try {
    back = yaml::parse(once, "rewritten.yaml");
  } catch (const brisk::Error& e) {
    ADD_FAILURE() << "the written text does not read back: " << e.what() << "\n" << once;
    return once;
  }
  EXPECT_TRUE(back == doc) << once;
  EXPECT_EQ(yaml::write(back), once);
  return once;
}

// Reads `text`, then as above.
std::string expect_text_round_trip(const std::string& text) {
  return expect_round_trip(yaml::parse(text, "in.yaml"));
}

yaml::Document key_and_value(const std::string& s) {
  return {{s, yaml::Value::string(s)},
          {"list", yaml::Value::list({yaml::Value::string(s)})},
          {"in_flow", yaml::Value::list({yaml::Value::map({{s, yaml::Value::string(s)}})})}};
}

}  // namespace

// The reported input: a key that is a byte-order mark was written unquoted at the start of the
// file, where yaml-cpp skips a byte-order mark, leaving ": 1" (a null key).
TEST(YamlRoundTrip, AKeyThatIsAByteOrderMarkReadsBack) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  const std::string bom = "\xEF\xBB\xBF";
  const std::string text = expect_text_round_trip("\"\\ufeff\": 1\n");
  EXPECT_EQ(text, "\"\\ufeff\": 1\n");  // visible in the file, and not a byte-order mark
  expect_round_trip(key_and_value(bom));
  expect_round_trip(key_and_value(bom + "key"));
  expect_round_trip(key_and_value(bom + bom));
  // A byte-order mark opening a file is skipped; one further on is part of the key it starts.
  const yaml::Document doc = yaml::parse(bom + "a: 1\n" + bom + "b: 2\n", "in.yaml");
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[0].first, "a");
  EXPECT_EQ(doc[1].first, bom + "b");
  expect_round_trip(doc);
  EXPECT_EQ(yaml::parse(bom + "# c\n---\na: 1\n", "in.yaml").size(), 1u);
}

// The second report: a key beginning with the bytes FE FF was read (yaml-cpp passes bytes through)
// and written at the start of the file, where yaml-cpp takes FE FF for a UTF-16 byte-order mark.
// No YAML file can hold bytes that are not UTF-8, so the reader refuses them, naming the line.
TEST(YamlRoundTrip, BytesThatAreNotUtf8AreRefusedNamingTheLineAndTheText) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  const auto error = [](const std::string& text) { return error_of([&] { yaml::parse(text, "cfg.yaml"); }); };
  std::string e = error("a: 1\n\"\xFE\xFFkey\": 1\n");
  EXPECT_NE(e.find("cfg.yaml:2:2: bytes that are not UTF-8 (0xFE 0xFF) in \"\\\"\\xFE\\xFFkey\\\": 1\""),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("save the file as UTF-8"), std::string::npos) << e;
  // The reported input itself: the key is the two bytes, quoted, on the first line.
  e = error("\"\xFE\xFF\": 1\n");
  EXPECT_NE(e.find("cfg.yaml:1:2: bytes that are not UTF-8 (0xFE 0xFF)"), std::string::npos) << e;
  e = error("\xFE\xFFkey: 1\n");
  EXPECT_NE(e.find("cfg.yaml: the file is UTF-16"), std::string::npos) << e;
  EXPECT_NE(error("a: b\xC3\n").find("cfg.yaml:1:5: bytes that are not UTF-8 (0xC3)"), std::string::npos);
  EXPECT_NE(error("a: \xC0\x80\n").find("not UTF-8 (0xC0 0x80)"), std::string::npos);           // overlong NUL
  EXPECT_NE(error("a: \xED\xA0\x80\n").find("not UTF-8 (0xED 0xA0 0x80)"), std::string::npos);  // a surrogate
  EXPECT_NE(error("a: \xF4\x90\x80\x80\n").find("not UTF-8"), std::string::npos);               // past U+10FFFF
  // The writer refuses them too (a Config set from flags can hold any bytes): an escape such as
  // "\xfe" would read back as U+00FE.
  e = error_of([] { yaml::write({{"k", yaml::Value::list({yaml::Value::string("a\xFE")})}}); });
  EXPECT_NE(e.find("yaml::write: k[0]: \"a\\xFE\" is not UTF-8 (byte 1)"), std::string::npos) << e;
  e = error_of([] { yaml::write({{"m", yaml::Value::map({{"\xFF", yaml::Value::null()}})}}); });
  EXPECT_NE(e.find("yaml::write: a key in m: \"\\xFF\" is not UTF-8"), std::string::npos) << e;
}

TEST(YamlRoundTrip, RawControlCharactersAreRefusedButEscapesOfThemReadBack) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  EXPECT_NE(error_of([] { yaml::parse("a: x\x7Fy\n", "cfg.yaml"); }).find("cfg.yaml:1:5: control character 0x7F"),
            std::string::npos);
  EXPECT_NE(error_of([] { yaml::parse("a: \xC2\x80\n", "cfg.yaml"); }).find("control character U+0080"),
            std::string::npos);
  EXPECT_NE(error_of([] { yaml::parse("a: \xEF\xBF\xBE\n", "cfg.yaml"); }).find("character U+FFFE is not allowed"),
            std::string::npos);
  // DEL was written raw, so the file written could not be read. C1 controls, noncharacters too.
  const std::string text =
      expect_text_round_trip("a: \"\\x7f\"\nb: \"\\x80\\x9f\"\nc: \"\\0\\e\\x01\\r\"\nd: \"\\uffff\\ufdd0\"\n");
  EXPECT_NE(text.find("a: \"\\x7f\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("b: \"\\u0080\\u009f\"\n"), std::string::npos) << text;
  for (char32_t c = 1; c < 0xA0; ++c) expect_round_trip(key_and_value(utf8(c) + "x" + utf8(c)));
}

// Line breaks other than \n and \r (NEL, U+2028, U+2029) are line breaks to YAML 1.1 (PyYAML) and
// not to yaml-cpp: written raw, the two would read different values. yaml-cpp 0.7 reads the
// escapes \N and \_ as single bytes that are not UTF-8; the reader makes them the characters.
TEST(YamlRoundTrip, NelAndUnicodeLineBreaksAreEscaped) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  const yaml::Document doc = yaml::parse("a: \"x\\Ny\\_z\\L\\P\"\n", "in.yaml");
  EXPECT_EQ(doc[0].second.text, "x\xC2\x85y\xC2\xA0z\xE2\x80\xA8\xE2\x80\xA9");
  const std::string text = expect_round_trip(doc);
  EXPECT_EQ(text, "a: \"x\\u0085y\\u00a0z\\u2028\\u2029\"\n");
  EXPECT_EQ(yaml::parse("a: x\xC2\x85y\n", "in.yaml")[0].second.text, "x\xC2\x85y");  // raw NEL is printable
}

// Invisible and format characters (Unicode's Cf, Zs but the space, Zl, Zp, default-ignorables)
// anywhere in a key or value are written as escapes: the file shows them, and a reader cannot take
// them for a byte-order mark, blank space or nothing.
TEST(YamlRoundTrip, InvisibleAndFormatCharactersAreWrittenAsEscapes) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  const std::vector<std::pair<char32_t, std::string>> chars = {
      {0x00A0, "\\u00a0"},      {0x00AD, "\\u00ad"},      {0x061C, "\\u061c"},      {0x180E, "\\u180e"},
      {0x200B, "\\u200b"},      {0x200F, "\\u200f"},      {0x202E, "\\u202e"},      {0x2060, "\\u2060"},
      {0x3000, "\\u3000"},      {0xFE0F, "\\ufe0f"},      {0xFEFF, "\\ufeff"},      {0xFFF9, "\\ufff9"},
      {0x1D173, "\\U0001d173"}, {0xE0001, "\\U000e0001"}, {0xE0100, "\\U000e0100"},
  };
  for (const auto& [c, escape] : chars) {
    for (const std::string& s : {utf8(c), utf8(c) + "x", "x" + utf8(c), "x " + utf8(c) + " y"}) {
      const std::string text = expect_round_trip(key_and_value(s));
      EXPECT_EQ(text.find(utf8(c)), std::string::npos) << text;
      EXPECT_NE(text.find(escape), std::string::npos) << text;
    }
  }
  // Visible non-ASCII text stays as it is, and plain.
  EXPECT_EQ(expect_round_trip({{"clé", yaml::Value::string("naïve 東京")}}), "clé: naïve 東京\n");
}

// Every character of the BMP (and a sample of the other planes, with the tags and variation
// selectors of plane 14 and every noncharacter) as a value and at both ends of a key reads back.
TEST(YamlRoundTrip, EveryCharacterReadsBackInKeysAndValues) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  yaml::Document doc;
  for (char32_t c = 1; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    if (c > 0xFFFF && (c < 0xE0000 || c > 0xE01FF) && (c & 0xFF) != 0 && (c & 0xFFFE) != 0xFFFE) continue;
    const std::string s = utf8(c);
    std::string key = s;
    key += "k";
    key += s;
    doc.push_back({key, yaml::Value::string(s)});
    if (doc.size() == 8192) {
      expect_round_trip(doc);
      doc.clear();
    }
  }
  expect_round_trip(doc);
}

// Plain text that means something else at the start of a line or of a value: document markers,
// indicators, comments, `: `, blank space at either end, and the empty string.
TEST(YamlRoundTrip, MarkersIndicatorsAndBlankSpaceAreQuoted) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  for (const std::string s :
       {"... x", "...",  "--- x", "---", "-",   "- x", "-x", "? x", "?",    ": x",    ":x",   "x:",  "%YAML", "#x",
        "x #y",  "x: y", "@x",    "`x",  "&a",  "*a",  "!t", "|",   ">",    "[x",     "]",    "{x",  "}",     ",x",
        "'x",    "\"x",  " x",    "x ",  "\tx", "x\t", " ",  "",    "x\ny", "x\r\ny", "x\\y", "it's"}) {
    expect_round_trip(key_and_value(s));
  }
  EXPECT_EQ(expect_round_trip({{"... x", yaml::Value::string("...")}}), "'... x': '...'\n");
  EXPECT_EQ(expect_round_trip({{"...x", yaml::Value::string("a:b")}}), "...x: a:b\n");  // plain where safe
}

// What YAML's core schema (brisk) and YAML 1.1 (PyYAML, so Accelerate) read as a boolean, null,
// number, date, value or merge key is quoted; look-alikes that are strings to both stay plain.
TEST(YamlRoundTrip, WordsAndNumbersOfEitherYamlVersionAreQuoted) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  for (const std::string s : {"null",   "Null",  "~",     "true",     "FALSE",      "yes",
                              "Off",    "y",     "N",     "3",        "-3",         "+3",
                              "0.5",    "1e3",   ".inf",  "+.Inf",    "-.INF",      ".NaN",
                              "0x1f",   "0b101", "017",   "1_000",    "1:30",       "12:30:00",
                              "1:30.5", ".5",    "1.5_0", "1_0.5e+3", "2024-01-31", "2001-12-14t21:59:43.10Z",
                              "=",      "<<"}) {
    const std::string text = expect_round_trip({{s, yaml::Value::string(s)}});
    std::string quoted = "'" + s;
    quoted += "': '";
    quoted += s;
    quoted += "'\n";
    EXPECT_EQ(text, quoted);
  }
  for (const std::string s : {"192.168.1.1", "1.2.3", "0,1", "3d", "1:x", "0x", "e5", "yess", "nulls", "True!"}) {
    std::string plain = s + ": ";
    plain += s;
    plain += "\n";
    EXPECT_EQ(expect_round_trip({{s, yaml::Value::string(s)}}), plain);
  }
  // The core schema's signed infinities are floats when read.
  const yaml::Document doc = yaml::parse("a: +.Inf\nb: +.INF\n", "in.yaml");
  EXPECT_EQ(doc[0].second.kind, Kind::Float);
  EXPECT_TRUE(std::isinf(doc[1].second.as_double("b")));
  // Floats are written with a dot, which YAML 1.1 needs: "1e+20" is a string to PyYAML.
  EXPECT_EQ(expect_round_trip({{"f", yaml::Value::number(1e20)}}), "f: 1.0e+20\n");
  EXPECT_EQ(expect_round_trip({{"f", yaml::Value::number(-2.5e-7)}}), "f: -2.5e-07\n");
}

// yaml-cpp (like YAML) takes `key:` for a key only up to 1024 bytes of key text; a file can hold a
// longer key as an explicit one ("? key"), and the writer writes it so.
TEST(YamlRoundTrip, KeysLongerThan1024BytesAreWrittenAsExplicitKeys) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  const std::string k1024(1024, 'k'), k1025(1025, 'k');
  EXPECT_EQ(expect_round_trip({{k1024, yaml::Value::integer(1)}}), k1024 + ": 1\n");
  EXPECT_EQ(expect_round_trip({{k1025, yaml::Value::integer(1)}}), "? " + k1025 + "\n: 1\n");
  // What made the limit matter: yaml-cpp refuses the implicit form of such a key.
  EXPECT_NE(error_of([&] { yaml::parse(k1025 + ": 1\n", "cfg.yaml"); }), "");
  const yaml::Document doc = yaml::parse("? " + std::string(2000, 'x') + "\n: 1\n", "in.yaml");
  ASSERT_EQ(doc.size(), 1u);
  expect_round_trip(doc);
  // Escapes lengthen a key: 300 zero-width spaces are 900 bytes, and 1,800 escaped.
  std::string zw;
  for (int i = 0; i < 300; ++i) zw += utf8(0x200B);
  expect_round_trip(key_and_value(zw));
  expect_round_trip({{"outer", yaml::Value::map({{k1025, yaml::Value::map({{"inner", yaml::Value::null()}})},
                                                 {zw, yaml::Value::list({yaml::Value::integer(1)})},
                                                 {"after", yaml::Value::boolean(true)}})}});
}

TEST(YamlRoundTrip, EmptyAndNullKeysAreRefusedSayingSo) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  for (const std::string text : {": 1\n", "~: 1\n", "null: 1\n", "a: {null: 1}\n", "\xEF\xBB\xBF: 1\n"})
    EXPECT_NE(error_of([&] { yaml::parse(text, "cfg.yaml"); }).find("cfg.yaml:1:"), std::string::npos) << text;
  EXPECT_NE(error_of([] {
              yaml::parse("a: 1\nnull: 1\n", "cfg.yaml");
            }).find("cfg.yaml:2:1: a key must not be empty or null"),
            std::string::npos);
  expect_text_round_trip("'null': 1\n'': 2\n'~': 3\n");
}

// `brisk config`'s files: a Config whose strings hold any of the above is written and read back to
// the same Config.
TEST(YamlRoundTrip, ConfigFilesWithAwkwardStringsReadBack) {
  if (!yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  using brisk::accelerate::Config;
  for (const std::string s :
       {"\xEF\xBB\xBF\x31\x30.0.0.1",  // a byte-order mark, then 10.0.0.1
        "... hosts", "- hosts #1", "hosts\t", "hosts\xE2\x80\xA8x", "0x1f", "1:30", "'", "\xE2\x80\x8B"}) {
    Config c;
    c.main_process_ip = s;
    c.hostfile = s;
    const std::string text = brisk::accelerate::config_to_yaml(c);
    Config back;
    EXPECT_NO_THROW(back = brisk::accelerate::config_from_yaml(text, "default_config.yaml")) << text;
    EXPECT_TRUE(back == c) << text;
  }
  Config bad;
  bad.hostfile = "hosts\xFE";
  const std::string e = error_of([&] { brisk::accelerate::config_to_yaml(bad); });
  EXPECT_NE(e.find("yaml::write: mpirun_config.mpirun_hostfile: \"hosts\\xFE\" is not UTF-8"), std::string::npos) << e;
}
