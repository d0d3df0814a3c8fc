// Fuzzes brisk's strict JSON parser (safetensors headers, checkpoint manifests and state).
// Any input must either parse or throw brisk::Error; a parsed value must write back out and
// parse again to the same text.
#include <brisk/core/error.h>
#include <brisk/data/json.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    brisk::data::json::Value v = brisk::data::json::parse(text);
    std::string once = v.dump();
    std::string twice = brisk::data::json::parse(once).dump();
    if (once != twice) __builtin_trap();
  } catch (const brisk::Error&) {
  }
  return 0;
}
