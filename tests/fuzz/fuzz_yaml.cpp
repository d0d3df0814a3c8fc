// Fuzzes the YAML config reader (accelerate/src/yaml.cpp) and the config built on it
// (config_from_yaml: keys, conversions, validation). Any input must either parse or throw
// brisk::Error; what parses must write back out and read again to the same document / config.
#include <brisk/accelerate/config.h>
#include <brisk/accelerate/yaml.h>
#include <brisk/util/error.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace yaml = brisk::accelerate::yaml;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const yaml::Document doc = yaml::parse(text, "fuzz.yaml");
    const std::string once = yaml::write(doc);
    const yaml::Document again = yaml::parse(once, "rewritten.yaml");
    if (again.size() != doc.size()) __builtin_trap();
    for (size_t i = 0; i < doc.size(); ++i)
      if (again[i].first != doc[i].first || !(again[i].second == doc[i].second)) __builtin_trap();
    if (yaml::write(again) != once) __builtin_trap();
  } catch (const brisk::Error&) {
    return 0;  // config_from_yaml would fail the same way (it parses with yaml::parse first)
  }
  try {
    const brisk::accelerate::Config c = brisk::accelerate::config_from_yaml(text, "fuzz.yaml");
    const std::string once = brisk::accelerate::config_to_yaml(c);
    const std::string twice =
        brisk::accelerate::config_to_yaml(brisk::accelerate::config_from_yaml(once, "rewritten.yaml"));
    if (once != twice) __builtin_trap();
  } catch (const brisk::Error&) {
  }
  return 0;
}
