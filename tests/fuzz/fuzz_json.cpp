// Fuzzes brisk's strict JSON parser (safetensors headers, checkpoint manifests and state).
// Any input must either parse or throw brisk::Error; a parsed value must write back out and
// parse again to the same text. The pull reader (json::Reader, which the safetensors reader
// uses) must accept exactly the texts that parse() accepts when duplicate keys are allowed, and
// parse() may refuse one of those only for a duplicate key.
#include <brisk/util/error.h>
#include <brisk/util/json.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace json = brisk::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  bool lenient_ok = true, skip_ok = true;
  try {
    json::parse(text, {.allow_duplicate_keys = true});
  } catch (const brisk::Error&) {
    lenient_ok = false;
  }
  try {
    json::Reader r(text);
    r.skip_value();
    r.finish();
  } catch (const brisk::Error&) {
    skip_ok = false;
  }
  if (lenient_ok != skip_ok) __builtin_trap();
  try {
    json::Value v = json::parse(text);
    if (!lenient_ok) __builtin_trap();
    std::string once = v.dump();
    std::string twice = json::parse(once).dump();
    if (once != twice) __builtin_trap();
    if (json::parse(v.dump(2)) != v) __builtin_trap();
  } catch (const brisk::Error& e) {
    if (lenient_ok && std::string(e.what()).find("duplicate key") == std::string::npos) __builtin_trap();
  }
  return 0;
}
