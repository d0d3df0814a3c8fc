// The Accelerator's options resolved: the program's value, else the environment's (what `brisk
// launch` and the config file set), else the default; each error names the option and its source.
#include "brisk/accelerate/accelerator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "accelerator_impl.h"
#include "brisk/accelerate/config.h"
#include "brisk/accelerate/env_vars.h"
#include "brisk/accelerate/host.h"
#include "brisk/autograd/autograd.h"
#include "brisk/core/profiler.h"
#include "brisk/core/rng.h"
#include "brisk/data/sampler.h"
#include "brisk/kernels/cuda.h"
#include "brisk/kernels/elementwise.h"
#include "brisk/kernels/factory.h"
#include "brisk/kernels/index.h"
#include "brisk/kernels/optim.h"
#include "brisk/kernels/settings.h"
#include "brisk/optim/clip.h"
#include "brisk/util/env.h"
#include "brisk/util/trace.h"

namespace brisk {

namespace {

namespace env = accelerate::env;

// One option resolved: the program's value, else the environment's (parsed), else the default.
template <class T, class Parse>
T pick(const std::optional<T>& program, const char* var, Parse parse, T fallback, const char* field,
       const std::function<const char*(const char*)>& getenv, std::map<std::string, std::string>& source) {
  if (program) {
    source[field] = "program";
    return *program;
  }
  if (var) {
    if (const char* v = getenv(var); v && *v) {
      source[field] = std::string("env ") + var;
      return parse(std::string(v), std::string(var));
    }
  }
  source[field] = "default";
  return fallback;
}

bool parse_bool(const std::string& v, const std::string& what) {
  const std::optional<bool> b = parse_bool_word(v);
  BRISK_CHECK(b.has_value(), "Accelerator: ", what, " must be a boolean (", kBoolWords, "), got '", v, "'");
  return *b;
}

int64_t parse_int(const std::string& v, const std::string& what) {
  const std::optional<int64_t> x = parse_integer<int64_t>(v);
  BRISK_CHECK(x.has_value(), "Accelerator: ", what, " must be an integer in [", std::numeric_limits<int64_t>::min(),
              ", ", std::numeric_limits<int64_t>::max(), "], got '", v, "'");
  return *x;
}

double parse_double(const std::string& v, const std::string& what) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  BRISK_CHECK(end && *end == '\0' && !v.empty(), "Accelerator: ", what, " must be a number, got '", v, "'");
  return x;
}

std::string parse_string(const std::string& v, const std::string&) {
  return v;
}

MixedPrecision parse_mixed_precision(const std::string& v, const std::string& var) {
  return parse_enum<MixedPrecision>(v, "Accelerator: mixed_precision (from " + var + ")");
}

Sharding parse_sharding(const std::string& v, const std::string& var) {
  return parse_enum<Sharding>(v, "Accelerator: sharding (from " + var + ")");
}

// "program" or "env BRISK_X" -> " (from BRISK_X)" for error messages.
std::string from(const AcceleratorSettings& s, const char* field) {
  auto it = s.source.find(field);
  if (it == s.source.end() || it->second == "default") return "";
  return it->second == "program" ? " (set by the program)" : " (from " + it->second.substr(4) + ")";
}

}  // namespace

AcceleratorSettings resolve_accelerator_options(const AcceleratorOptions& o,
                                                const std::function<const char*(const char*)>& getenv_fn) {
  std::function<const char*(const char*)> getenv = getenv_fn ? getenv_fn : [](const char* n) { return std::getenv(n); };
  AcceleratorSettings s;
  auto& src = s.source;
  s.mixed_precision = pick<MixedPrecision>(o.mixed_precision, env::kMixedPrecision, parse_mixed_precision,
                                           MixedPrecision::No, "mixed_precision", getenv, src);
  s.gradient_accumulation_steps = pick<int64_t>(o.gradient_accumulation_steps, env::kGradientAccumulationSteps,
                                                parse_int, 1, "gradient_accumulation_steps", getenv, src);
  s.sharding = pick<Sharding>(o.sharding, env::kSharding, parse_sharding, Sharding::None, "sharding", getenv, src);
  s.zero3_wrap = o.zero3_wrap;
  s.cpu = pick<bool>(o.cpu, env::kCpu, parse_bool, false, "cpu", getenv, src);
  s.device_placement = pick<bool>(o.device_placement, nullptr, parse_bool, true, "device_placement", getenv, src);
  s.split_batches = pick<bool>(o.split_batches, nullptr, parse_bool, false, "split_batches", getenv, src);
  s.even_batches = pick<bool>(o.even_batches, nullptr, parse_bool, true, "even_batches", getenv, src);
  if (o.seed) {
    s.seed = *o.seed;
    src["seed"] = "program";
  } else if (const char* v = getenv(env::kSeed); v && *v) {
    const std::optional<uint64_t> x = parse_integer<uint64_t>(v);
    BRISK_CHECK(x.has_value(), "Accelerator: seed (from ", env::kSeed, ") must be an integer in [0, ",
                std::numeric_limits<uint64_t>::max(), "], got '", v, "'");
    s.seed = *x;
    src["seed"] = std::string("env ") + env::kSeed;
  } else {
    src["seed"] = "default";
  }
  s.project_dir = pick<std::string>(o.project_dir, env::kProjectDir, parse_string, ".", "project_dir", getenv, src);
  s.automatic_checkpoint_naming =
      pick<bool>(o.automatic_checkpoint_naming, nullptr, parse_bool, false, "automatic_checkpoint_naming", getenv, src);
  if (o.total_limit) {
    s.total_limit = *o.total_limit;
    src["total_limit"] = "program";
  } else {
    src["total_limit"] = "default";
  }
  s.async_save = pick<bool>(o.async_save, env::kAsyncSave, parse_bool, false, "async_save", getenv, src);
  s.bucket_cap_mb = pick<double>(o.bucket_cap_mb, env::kBucketCapMb, parse_double, 25.0, "bucket_cap_mb", getenv, src);
  s.find_unused_parameters = pick<bool>(o.find_unused_parameters, env::kFindUnusedParameters, parse_bool, false,
                                        "find_unused_parameters", getenv, src);
  s.nan_watch = pick<bool>(o.nan_watch, env::kNanWatch, parse_bool, false, "nan_watch", getenv, src);
  if (o.deterministic) {
    s.deterministic = o.deterministic;
    src["deterministic"] = "program";
  } else if (const char* v = getenv(env::kDeterministic); v && *v) {
    s.deterministic = parse_bool(v, env::kDeterministic);
    src["deterministic"] = std::string("env ") + env::kDeterministic;
  } else {
    src["deterministic"] = "default";
  }
  if (o.profile) {
    s.profile = o.profile;
    src["profile"] = "program";
  } else if (const char* v = getenv(env::kProfile); v && *v) {
    // A boolean word, or a file for the table (which means on).
    s.profile = parse_bool_word(v).value_or(true);
    src["profile"] = std::string("env ") + env::kProfile;
  } else {
    src["profile"] = "default";
  }
  s.scaler.init_scale =
      pick<double>(o.scaler_init_scale, nullptr, parse_double, 65536.0, "scaler_init_scale", getenv, src);
  s.scaler.growth_factor =
      pick<double>(o.scaler_growth_factor, nullptr, parse_double, 2.0, "scaler_growth_factor", getenv, src);
  s.scaler.backoff_factor =
      pick<double>(o.scaler_backoff_factor, nullptr, parse_double, 0.5, "scaler_backoff_factor", getenv, src);
  s.scaler.growth_interval =
      pick<int64_t>(o.scaler_growth_interval, nullptr, parse_int, 2000, "scaler_growth_interval", getenv, src);

  // Validation: each error names the option, where its value came from and the value.
  BRISK_CHECK(s.gradient_accumulation_steps >= 1, "Accelerator: gradient_accumulation_steps",
              from(s, "gradient_accumulation_steps"), " must be at least 1, got ", s.gradient_accumulation_steps);
  BRISK_CHECK(!s.total_limit || *s.total_limit >= 1, "Accelerator: total_limit must be at least 1, got ",
              s.total_limit.value_or(0));
  BRISK_CHECK(s.bucket_cap_mb > 0, "Accelerator: bucket_cap_mb", from(s, "bucket_cap_mb"), " must be positive, got ",
              s.bucket_cap_mb);
  BRISK_CHECK(!s.project_dir.empty(), "Accelerator: project_dir", from(s, "project_dir"), " is empty");
  BRISK_CHECK(s.scaler.init_scale > 0, "Accelerator: scaler_init_scale must be positive, got ", s.scaler.init_scale);
  BRISK_CHECK(s.scaler.growth_factor > 1, "Accelerator: scaler_growth_factor must be > 1, got ",
              s.scaler.growth_factor);
  BRISK_CHECK(s.scaler.backoff_factor > 0 && s.scaler.backoff_factor < 1,
              "Accelerator: scaler_backoff_factor must be in (0, 1), got ", s.scaler.backoff_factor);
  BRISK_CHECK(s.scaler.growth_interval >= 1, "Accelerator: scaler_growth_interval must be at least 1, got ",
              s.scaler.growth_interval);
  return s;
}

}  // namespace brisk
