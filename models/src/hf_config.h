// Reading and writing a Hugging Face folder's config.json (private to models/): typed, range-checked
// look-ups whose errors name the key, the value and the file, and the writer transformers' layout
// (keys sorted, two-space indent, a final newline) so that saving is deterministic.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "brisk/core/dtype.h"
#include "brisk/util/json.h"

namespace brisk::models::hf {

// The largest size (a dimension, a count) brisk takes from a config.json: 2^31.
constexpr int64_t kMaxConfigSize = int64_t{1} << 31;

class ConfigReader {
 public:
  // Reads <dir>/config.json; `who` ("BertModel::from_pretrained") starts every error.
  ConfigReader(const std::string& dir, std::string who);

  const std::string& path() const { return path_; }
  const std::string& who() const { return who_; }
  // Absent keys give `fallback` (transformers' default for the class; its config.json leaves out
  // values equal to the defaults of PretrainedConfig).
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  // An integer, or null (nullopt); absent: fallback.
  std::optional<int64_t> optional_integer(const std::string& key, std::optional<int64_t> fallback, int64_t min,
                                          int64_t max);
  // A number in [min, max] (max_open: [min, max)).
  double number(const std::string& key, double fallback, double min, double max, bool max_open = false);
  std::optional<double> optional_number(const std::string& key, double min, double max, bool max_open = false);
  bool boolean(const std::string& key, bool fallback);
  // A string from `valid` (the error lists them).
  std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& valid);
  // The value itself (nullptr when absent), marked as read.
  const json::Value* raw(const std::string& key);
  // Requires `key`, when present, to hold `expected` (brisk supports nothing else); `why` says so.
  void require(const std::string& key, const json::Value& expected, const std::string& why);
  // Leaves `key` (already checked) among other_keys, to be written back as it was.
  void keep(const std::string& key) { read_.erase(key); }
  // Throws "<who>: <path>: \"key\" <what>, got <value>".
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  // The keys not read so far, in the file's order (kept to be written back).
  json::Value other_keys() const;

 private:
  std::string who_, path_;
  json::Value doc_;
  std::set<std::string> read_;
};

// Checks `model_type` and `architectures`: the type must be `model_type` (another known type names
// its loader; an unknown one lists the known types), each architecture one of `supported`.
void check_model_kind(ConfigReader& config, const std::string& model_type, const std::vector<std::string>& supported);

// The text of a config.json: `keys` and `other_keys` merged (keys win), sorted by key at the top
// level, two-space indent and a final newline, as transformers writes it.
std::string config_text(const json::Value& keys, const json::Value& other_keys);

// The dtype name transformers writes for torch_dtype ("float32", "float16", "bfloat16").
const char* torch_dtype_name(DType dtype);

}  // namespace brisk::models::hf
