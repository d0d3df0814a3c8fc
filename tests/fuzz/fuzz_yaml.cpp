// Fuzzes the YAML config reader (accelerate/src/yaml.cpp) and the config built on it
// (config_from_yaml: keys, conversions, validation). Any input must either parse or throw
// brisk::Error; what parses must write back out and read again to the same document / config: an
// error while reading the written text is a finding, not a rejected input.
#include <brisk/accelerate/config.h>
#include <brisk/accelerate/yaml.h>
#include <brisk/util/error.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace yaml = brisk::accelerate::yaml;
namespace acc = brisk::accelerate;

namespace {

[[noreturn]] void finding(const char* what, const std::string& detail, const std::string& written) {
  std::fprintf(stderr, "fuzz_yaml: %s: %s\n--- written ---\n%s\n--- end ---\n", what, detail.c_str(), written.c_str());
  __builtin_trap();
}

// read -> write -> read gives the same document, and writing that gives the same text; with a
// header comment too (`brisk config` writes one), so keys are checked at the start of the file and
// after other lines.
void check_document(const yaml::Document& doc) {
  for (const std::string comment : {"", "header"}) {
    std::string once;
    yaml::Document again;
    try {
      once = yaml::write(doc, comment);
      again = yaml::parse(once, "rewritten.yaml");
    } catch (const brisk::Error& e) {
      finding("the document written does not read back", e.what(), once);
    }
    if (!(again == doc)) finding("the document written reads back different", "", once);
    if (yaml::write(again, comment) != once) finding("writing the document read back gives other text", "", once);
  }
}

// config_from_yaml -> config_to_yaml -> config_from_yaml gives the same Config (`brisk config`'s
// files survive being written and read).
void check_config(const std::string& text) {
  acc::Config c;
  try {
    c = acc::config_from_yaml(text, "fuzz.yaml");
  } catch (const brisk::Error&) {
    return;
  }
  std::string once;
  acc::Config back;
  try {
    once = acc::config_to_yaml(c);
    back = acc::config_from_yaml(once, "default_config.yaml");
  } catch (const brisk::Error& e) {
    finding("the config written does not read back", e.what(), once);
  }
  if (!(back == c)) finding("the config written reads back different", "", once);
  if (acc::config_to_yaml(back) != once) finding("writing the config read back gives other text", "", once);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  yaml::Document doc;
  try {
    doc = yaml::parse(text, "fuzz.yaml");
  } catch (const brisk::Error&) {
    return 0;  // config_from_yaml would fail the same way (it parses with yaml::parse first)
  }
  check_document(doc);
  check_config(text);
  return 0;
}
