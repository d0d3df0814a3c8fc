// config.json of Hugging Face folders: the checked reader and the deterministic writer.
#include "hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "brisk/util/error.h"

namespace brisk::models::hf {

namespace {

constexpr uintmax_t kMaxConfigBytes = 10'000'000;  // a config.json is a few KB; id2label of a big label set more

std::string read_config(const std::string& path, const std::string& who) {
  std::error_code ec;
  BRISK_CHECK(std::filesystem::is_regular_file(path, ec), who, ": ", path,
              " is missing (a Hugging Face model folder holds config.json beside its weights)");
  const uintmax_t size = std::filesystem::file_size(path, ec);
  BRISK_CHECK(!ec && size <= kMaxConfigBytes, who, ": ", path, " is ", size, " bytes; over ", kMaxConfigBytes,
              " is refused");
  std::ifstream f(path, std::ios::binary);
  BRISK_CHECK(f, who, ": cannot open ", path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string range_text(double min, double max, bool max_open) {
  return detail::str_cat("in [", min, ", ", max, max_open ? ")" : "]");
}

}  // namespace

ConfigReader::ConfigReader(const std::string& dir, std::string who)
    : who_(std::move(who)), path_((std::filesystem::path(dir) / "config.json").string()) {
  try {
    doc_ = json::parse(read_config(path_, who_));
  } catch (const Error& e) {
    if (e.message().rfind(who_, 0) == 0) throw;
    BRISK_THROW(who_, ": ", path_, " is not valid JSON: ", e.message());
  }
  BRISK_CHECK(doc_.is_object(), who_, ": ", path_, " must hold a JSON object, got ", json::type_name(doc_.type()));
}

void ConfigReader::fail(const std::string& key, const std::string& what) const {
  const json::Value* v = doc_.find(key);
  BRISK_THROW(who_, ": ", path_, ": \"", key, "\" ", what, ", got ", v ? v->dump() : std::string("nothing"));
}

const json::Value* ConfigReader::raw(const std::string& key) {
  read_.insert(key);
  return doc_.find(key);
}

int64_t ConfigReader::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  std::optional<int64_t> v = optional_integer(key, fallback, min, max);
  if (!v) fail(key, detail::str_cat("must be an integer in [", min, ", ", max, "]"));
  return *v;
}

std::optional<int64_t> ConfigReader::optional_integer(const std::string& key, std::optional<int64_t> fallback,
                                                      int64_t min, int64_t max) {
  const json::Value* v = raw(key);
  if (!v) return fallback;
  if (v->is_null()) return std::nullopt;
  const double d = v->is_integer() ? v->as_double() : NAN;  // NaN fails both tests below
  if (!(d >= static_cast<double>(min) && d <= static_cast<double>(max)) || d >= 9.2e18)
    fail(key, detail::str_cat("must be an integer in [", min, ", ", max, "]"));
  return v->as_int();
}

double ConfigReader::number(const std::string& key, double fallback, double min, double max, bool max_open) {
  const json::Value* v = raw(key);
  if (!v) return fallback;
  std::optional<double> n = optional_number(key, min, max, max_open);
  if (!n) fail(key, "must be a number " + range_text(min, max, max_open));
  return *n;
}

std::optional<double> ConfigReader::optional_number(const std::string& key, double min, double max, bool max_open) {
  const json::Value* v = raw(key);
  if (!v || v->is_null()) return std::nullopt;
  const std::string want = "must be a number " + range_text(min, max, max_open);
  if (!v->is_number()) fail(key, want);
  const double n = v->as_double();
  if (!std::isfinite(n) || n < min || n > max || (max_open && n == max)) fail(key, want);
  return n;
}

bool ConfigReader::boolean(const std::string& key, bool fallback) {
  const json::Value* v = raw(key);
  if (!v) return fallback;
  if (!v->is_bool()) fail(key, "must be true or false");
  return v->as_bool();
}

std::string ConfigReader::choice(const std::string& key, const std::string& fallback,
                                 const std::vector<std::string>& valid) {
  const json::Value* v = raw(key);
  if (!v) return fallback;
  if (v->is_string() && std::find(valid.begin(), valid.end(), v->as_string()) != valid.end()) return v->as_string();
  std::string list;
  for (const std::string& s : valid) list += (list.empty() ? "\"" : ", \"") + s + "\"";
  fail(key, "must be one of " + list + " (the values brisk supports)");
}

void ConfigReader::require(const std::string& key, const json::Value& expected, const std::string& why) {
  const json::Value* v = raw(key);
  if (v && !(*v == expected)) fail(key, "must be " + expected.dump() + ": " + why);
}

json::Value ConfigReader::other_keys() const {
  json::Value out = json::Value::object();
  for (const auto& [key, value] : doc_.items())
    if (!read_.count(key)) out.set(key, value);
  return out;
}

void check_model_kind(ConfigReader& config, const std::string& model_type, const std::vector<std::string>& supported) {
  static const std::vector<std::pair<std::string, std::string>> kKnown = {
      {"bert", "models::BertModel, BertForSequenceClassification or BertForMaskedLM::from_pretrained"},
      {"gpt2", "models::GPT2::from_pretrained"}};
  if (const json::Value* t = config.raw("model_type")) {
    if (!t->is_string()) config.fail("model_type", "must be a string");
    const std::string& type = t->as_string();
    if (type != model_type) {
      auto known = std::find_if(kKnown.begin(), kKnown.end(), [&](const auto& k) { return k.first == type; });
      if (known != kKnown.end())
        config.fail("model_type",
                    "must be \"" + model_type + "\" here: a \"" + type + "\" folder loads with " + known->second);
      config.fail("model_type", "is not a model type brisk reads (supported: \"bert\", \"gpt2\")");
    }
  }
  if (const json::Value* a = config.raw("architectures")) {
    if (a->is_null()) return;
    std::string list;
    for (const std::string& s : supported) list += (list.empty() ? "" : ", ") + s;
    if (!a->is_array()) config.fail("architectures", "must be a list of class names");
    for (const json::Value& name : a->as_array())
      if (!name.is_string() || std::find(supported.begin(), supported.end(), name.as_string()) == supported.end())
        config.fail("architectures", "names an architecture brisk does not read (supported: " + list + ")");
  }
}

std::string config_text(const json::Value& keys, const json::Value& other_keys) {
  json::Value::Object all = keys.items();
  if (other_keys.is_object())
    for (const auto& [key, value] : other_keys.items())
      if (!keys.contains(key)) all.emplace_back(key, value);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return json::Value::object(std::move(all)).dump(2) + "\n";
}

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
    case DType::F64:
      return "float64";
    default:
      return "float32";
  }
}

}  // namespace brisk::models::hf
