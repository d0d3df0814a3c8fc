// The launch configuration file: key table, validation, YAML conversion, atomic save.
#include "brisk/accelerate/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "brisk/core/enums.h"
#include "brisk/util/error.h"
#include "brisk/util/fs.h"

namespace brisk::accelerate {

namespace fs = std::filesystem;

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = {
      {"compute_environment", "where the job runs: LOCAL_MACHINE", &Config::compute_environment},
      {"distributed_type", "NO (one process), MULTI_CPU or MULTI_GPU", &Config::distributed_type},
      {"num_machines", "hosts in the job", &Config::num_machines},
      {"num_processes", "processes over all hosts", &Config::num_processes},
      {"machine_rank", "this host's index (0 .. num_machines-1)", &Config::machine_rank},
      {"main_process_ip", "address of the host running rank 0", &Config::main_process_ip},
      {"main_process_port", "port on the main host", &Config::main_process_port},
      {"mixed_precision", "no, fp16 or bf16", &Config::mixed_precision},
      {"gpu_ids", "GPUs to use: all, or a comma list such as 0,1 (sets CUDA_VISIBLE_DEVICES)", &Config::gpu_ids},
      {"use_cpu", "run on the CPU even where GPUs are present", &Config::use_cpu},
      {"debug", "check that ranks call the same collectives (BRISK_DEBUG=1)", &Config::debug},
      {"hostfile", "OpenMPI hostfile listing the hosts of a multi-host job", &Config::hostfile},
      {"timeout", "seconds a collective may take before the job fails", &Config::timeout},
      {"sharding", "none, zero1, zero2 or zero3: ZeRO stage of sharded data parallelism (BRISK_SHARDING)",
       &Config::sharding},
      {"max_restarts", "times brisk launch starts a failed job again (0: never)", &Config::max_restarts},
      {"preempt_grace", "seconds a job preempted by SIGTERM or SIGUSR1 has to save and stop (90)",
       &Config::preempt_grace},
  };
  return keys;
}

std::string valid_keys_text() {
  std::string s;
  for (const ConfigKey& k : config_keys()) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

bool is_valid_mixed_precision(const std::string& s) {
  return try_parse_enum<MixedPrecision>(s).has_value();
}

std::string sharding_from_zero_stage(int64_t stage, const std::string& what) {
  BRISK_CHECK(stage >= 0 && stage <= 3, what, ": expected a ZeRO stage 0, 1, 2 or 3, got ", stage);
  return stage == 0 ? "none" : "zero" + std::to_string(stage);
}

int zero_stage(const std::string& sharding, const std::string& what) {
  const auto s = parse_enum<Sharding>(sharding, what);
  return s == Sharding::None ? 0 : s == Sharding::Zero1 ? 1 : s == Sharding::Zero2 ? 2 : 3;
}

std::string sharding_from_fsdp_strategy(const std::string& strategy, const std::string& what) {
  if (strategy == "NO_SHARD" || strategy == "3") return "none";
  if (strategy == "SHARD_GRAD_OP" || strategy == "2") return "zero2";
  if (strategy == "FULL_SHARD" || strategy == "1") return "zero3";
  BRISK_THROW(what, ": expected NO_SHARD, SHARD_GRAD_OP or FULL_SHARD, got '", strategy,
              "' (brisk has no hybrid sharding; see docs/sharding.md)");
}

std::vector<int> parse_gpu_ids(const std::string& s, const std::string& what) {
  if (s == "all") return {};
  std::vector<int> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    bool digits = !item.empty() && item.size() < 6;
    for (char c : item) digits &= c >= '0' && c <= '9';
    BRISK_CHECK(digits, what, ": expected 'all' or a comma list of GPU indices such as 0,1, got '", s, "'");
    int id = std::stoi(item);
    for (int old : ids) BRISK_CHECK(old != id, what, ": GPU ", id, " is listed twice in '", s, "'");
    ids.push_back(id);
  }
  BRISK_CHECK(!ids.empty(), what, ": expected 'all' or a comma list of GPU indices such as 0,1, got '", s, "'");
  return ids;
}

void validate(const Config& c, const std::string& source) {
  auto where = [&](const char* key) { return source.empty() ? std::string(key) : source + ": " + key; };
  if (c.compute_environment)
    BRISK_CHECK(*c.compute_environment == "LOCAL_MACHINE", where("compute_environment"), ": '", *c.compute_environment,
                "' is not supported; brisk runs on LOCAL_MACHINE");
  if (c.distributed_type) {
    const std::string& d = *c.distributed_type;
    // DEEPSPEED and FSDP (Accelerate's) run as MULTI_GPU, with the sharding their section sets.
    BRISK_CHECK(d == "NO" || d == "MULTI_CPU" || d == "MULTI_GPU" || d == "DEEPSPEED" || d == "FSDP",
                where("distributed_type"), ": expected NO, MULTI_CPU, MULTI_GPU, DEEPSPEED or FSDP, got '", d, "'");
  }
  if (c.num_machines)
    BRISK_CHECK(*c.num_machines >= 1, where("num_machines"), ": must be at least 1, got ", *c.num_machines);
  if (c.num_processes)
    BRISK_CHECK(*c.num_processes >= 1, where("num_processes"), ": must be at least 1, got ", *c.num_processes);
  if (c.num_processes && c.num_machines)
    BRISK_CHECK(*c.num_processes >= *c.num_machines, where("num_processes"), ": ", *c.num_processes,
                " processes cannot fill ", *c.num_machines, " machines (need at least one per machine)");
  if (c.distributed_type && *c.distributed_type == "NO" && c.num_processes)
    BRISK_CHECK(*c.num_processes == 1, where("distributed_type"), ": NO means one process, but num_processes is ",
                *c.num_processes, "; set distributed_type to MULTI_CPU or MULTI_GPU");
  if (c.machine_rank) {
    BRISK_CHECK(*c.machine_rank >= 0, where("machine_rank"), ": must not be negative, got ", *c.machine_rank);
    if (c.num_machines)
      BRISK_CHECK(*c.machine_rank < *c.num_machines, where("machine_rank"), ": ", *c.machine_rank,
                  " is not below num_machines (", *c.num_machines, ")");
  }
  if (c.main_process_port)
    BRISK_CHECK(*c.main_process_port >= 1 && *c.main_process_port <= 65535, where("main_process_port"),
                ": expected a port in 1..65535, got ", *c.main_process_port);
  if (c.mixed_precision) parse_enum<MixedPrecision>(*c.mixed_precision, where("mixed_precision"));
  if (c.gpu_ids) parse_gpu_ids(*c.gpu_ids, where("gpu_ids"));
  if (c.sharding) parse_enum<Sharding>(*c.sharding, where("sharding"));
  if (c.hostfile) BRISK_CHECK(!c.hostfile->empty(), where("hostfile"), ": empty path");
  if (c.timeout)
    BRISK_CHECK(std::isfinite(*c.timeout) && *c.timeout > 0, where("timeout"),
                ": expected a positive number of seconds, got ", *c.timeout);
  if (c.max_restarts)
    BRISK_CHECK(*c.max_restarts >= 0, where("max_restarts"), ": must not be negative, got ", *c.max_restarts);
  if (c.preempt_grace)
    BRISK_CHECK(std::isfinite(*c.preempt_grace) && *c.preempt_grace > 0, where("preempt_grace"),
                ": expected a positive number of seconds, got ", *c.preempt_grace);
}

Config merge(const Config& high, const Config& low) {
  Config out = low;
  for (const ConfigKey& k : config_keys())
    std::visit(
        [&](auto member) {
          if ((high.*member).has_value()) out.*member = high.*member;
        },
        k.member);
  return out;
}

namespace {

// Keys Accelerate's ClusterConfig writes (or used to) that brisk has no meaning for: read and
// reported as ignored, never an error. docs/config-files.md lists them.
const std::vector<std::string>& accelerate_only_keys() {
  static const std::vector<std::string> keys = {"rdzv_backend",
                                                "same_network",
                                                "main_training_function",
                                                "enable_cpu_affinity",
                                                "downcast_bf16",
                                                "tpu_name",
                                                "tpu_zone",
                                                "tpu_use_cluster",
                                                "tpu_use_sudo",
                                                "command_file",
                                                "commands",
                                                "tpu_vm",
                                                "tpu_env",
                                                "dynamo_config",
                                                "fp8_config",
                                                "tp_config",
                                                "megatron_lm_config",
                                                "ipex_config",
                                                "parallelism_config",
                                                "fp16",
                                                "dynamo_backend"};
  return keys;
}

// What `accelerate config` writes when a feature is off: not worth a warning.
bool is_off_value(const std::string& key, const yaml::Value& v) {
  switch (v.kind) {
    case yaml::Value::Kind::Null:
      return true;
    case yaml::Value::Kind::List:
      return v.items.empty();
    case yaml::Value::Kind::Map:
      for (const auto& [k, item] : v.entries)
        if (!is_off_value(k, item)) return false;
      return true;
    default: {
      std::string t = v.text;
      for (char& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (t == "no" || t == "false" || t.empty()) return true;
      return (key == "rdzv_backend" && t == "static") || (key == "main_training_function" && t == "main") ||
             key == "same_network";
    }
  }
}

}  // namespace

Config config_from_yaml(const std::string& text, const std::string& source, std::vector<std::string>* ignored) {
  yaml::Document doc = yaml::parse(text, source);
  std::vector<std::string> unknown;
  const std::vector<std::string>& accelerate_keys = accelerate_only_keys();
  // Accelerate's mpirun section: its hostfile is brisk's hostfile; the rest is ignored.
  const yaml::Value* mpirun_hostfile = nullptr;
  // deepspeed_config.zero_stage and fsdp_config.fsdp_sharding_strategy: the sharding they ask for
  // (the other keys of both sections are ignored).
  std::vector<std::pair<std::string, std::string>> sharding_asked;  // (where, value)
  auto section = [&](const std::string& key, const yaml::Value& v, const char* wanted) {
    BRISK_CHECK(v.kind == yaml::Value::Kind::Map || v.is_null(), source, ":", v.line, ": ", key,
                ": expected a mapping such as {", wanted, ": ...}");
    for (const auto& [sub, sv] : v.entries) {
      const std::string what = ::brisk::detail::str_cat(source, ":", sv.line, ": ", key, ".", sub);
      if (sub == wanted && !sv.is_null()) {
        sharding_asked.emplace_back(what, sub == std::string("zero_stage")
                                              ? sharding_from_zero_stage(sv.as_int(what), what)
                                              : sharding_from_fsdp_strategy(sv.as_string(what), what));
      } else if (ignored && !is_off_value(sub, sv)) {
        ignored->push_back(::brisk::detail::str_cat(key, ".", sub));
      }
    }
  };
  for (const auto& [key, v] : doc) {
    bool known = false;
    for (const ConfigKey& k : config_keys()) known |= key == k.name;
    if (key == "mpirun_config") {
      known = true;
      BRISK_CHECK(v.kind == yaml::Value::Kind::Map || v.is_null(), source, ":", v.line,
                  ": mpirun_config: expected a mapping such as {mpirun_hostfile: hosts}");
      for (const auto& [sub, sv] : v.entries) {
        if (sub == "mpirun_hostfile") {
          mpirun_hostfile = &sv;
        } else if (ignored && !is_off_value(sub, sv)) {
          ignored->push_back("mpirun_config." + sub);
        }
      }
    }
    if (key == "deepspeed_config" || key == "fsdp_config") {
      known = true;
      section(key, v, key == "deepspeed_config" ? "zero_stage" : "fsdp_sharding_strategy");
    }
    const bool accelerate_only =
        std::find(accelerate_keys.begin(), accelerate_keys.end(), key) != accelerate_keys.end();
    if (accelerate_only && ignored && !is_off_value(key, v)) ignored->push_back(key);
    if (!known && !accelerate_only) unknown.push_back("'" + key + "' (line " + std::to_string(v.line) + ")");
  }
  if (!unknown.empty()) {
    std::string names;
    for (const std::string& u : unknown) names += (names.empty() ? "" : ", ") + u;
    BRISK_THROW(source, ": unknown key", unknown.size() > 1 ? "s " : " ", names, "; valid keys: ", valid_keys_text(),
                ", mpirun_config.mpirun_hostfile (and the keys Accelerate writes, which brisk ignores: see ",
                "docs/config-files.md)");
  }
  Config c;
  for (const ConfigKey& k : config_keys()) {
    const yaml::Value* v = yaml::find(doc, k.name);
    if (!v || v->is_null()) continue;
    std::string what = source + ":" + std::to_string(v->line) + ": " + k.name;
    std::visit(
        [&](auto member) {
          using T = typename std::remove_reference_t<decltype(c.*member)>::value_type;
          if constexpr (std::is_same_v<T, std::string>) {
            c.*member = v->as_string(what);
          } else if constexpr (std::is_same_v<T, bool>) {
            c.*member = v->as_bool(what);
          } else if constexpr (std::is_same_v<T, int>) {
            int64_t i = v->as_int(what);
            BRISK_CHECK(i >= std::numeric_limits<int>::min() && i <= std::numeric_limits<int>::max(), what, ": ", i,
                        " is out of range");
            c.*member = static_cast<int>(i);
          } else {
            c.*member = v->as_double(what);
          }
        },
        k.member);
  }
  if (mpirun_hostfile && !mpirun_hostfile->is_null()) {
    const std::string what = source + ":" + std::to_string(mpirun_hostfile->line) + ": mpirun_config.mpirun_hostfile";
    const std::string path = mpirun_hostfile->as_string(what);
    BRISK_CHECK(!c.hostfile || *c.hostfile == path, what, ": '", path, "' differs from hostfile '", *c.hostfile,
                "'; keep one of the two");
    c.hostfile = path;
  }
  for (const auto& [what, value] : sharding_asked) {
    BRISK_CHECK(!c.sharding || *c.sharding == value, what, " asks for sharding '", value, "' but sharding is '",
                *c.sharding, "'; keep one of the two");
    c.sharding = value;
  }
  validate(c, source);
  return c;
}

std::string config_to_yaml(const Config& c) {
  yaml::Document doc;
  for (const ConfigKey& k : config_keys())
    std::visit(
        [&](auto member) {
          const auto& field = c.*member;
          if (!field) return;
          using T = typename std::remove_reference_t<decltype(field)>::value_type;
          if constexpr (std::is_same_v<T, std::string>) {
            // Accelerate's spelling of the hostfile, so Accelerate reads the file too.
            if (std::string(k.name) == "hostfile")
              doc.push_back({"mpirun_config", yaml::Value::map({{"mpirun_hostfile", yaml::Value::string(*field)}})});
            // And of the sharding: Accelerate's loader refuses keys it does not know.
            else if (std::string(k.name) == "sharding")
              doc.push_back({"deepspeed_config",
                             yaml::Value::map({{"zero_stage", yaml::Value::integer(zero_stage(*field, "sharding"))}})});
            else
              doc.push_back({k.name, yaml::Value::string(*field)});
          } else if constexpr (std::is_same_v<T, bool>) {
            doc.push_back({k.name, yaml::Value::boolean(*field)});
          } else if constexpr (std::is_same_v<T, int>) {
            doc.push_back({k.name, yaml::Value::integer(*field)});
          } else {
            doc.push_back({k.name, yaml::Value::number(*field)});
          }
        },
        k.member);
  return yaml::write(doc,
                     "brisk launch configuration, written by `brisk config`.\n"
                     "`brisk launch` reads it; its flags override these values.");
}

std::string default_config_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg && *xdg) return (fs::path(xdg) / "brisk" / "default_config.yaml").string();
  const char* home = std::getenv("HOME");
  BRISK_CHECK(home && *home, "config: neither XDG_CONFIG_HOME nor HOME is set; pass --config_file PATH");
  return (fs::path(home) / ".config" / "brisk" / "default_config.yaml").string();
}

Config load_config(const std::string& path, std::vector<std::string>* ignored) {
  std::ifstream in(path, std::ios::binary);
  BRISK_CHECK(in.good(), "config: cannot read '", path, "'; write one with `brisk config --config_file ", path, "`");
  std::stringstream ss;
  ss << in.rdbuf();
  return config_from_yaml(ss.str(), path, ignored);
}

void save_config(const Config& c, const std::string& path) {
  validate(c, path);
  fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    BRISK_CHECK(!ec, "config: cannot create folder '", target.parent_path().string(), "': ", ec.message());
  }
  io::write_file_atomic(path, config_to_yaml(c), "save_config");
}

}  // namespace brisk::accelerate
