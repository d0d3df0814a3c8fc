// The launch configuration written by `brisk config` and read by `brisk launch` (and later by the
// Accelerator): a flat YAML file whose keys follow Hugging Face Accelerate's where they mean the same.
#pragma once
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "brisk/accelerate/yaml.h"

namespace brisk::accelerate {

// Every field is optional: unset is not the same as the default, so a flag, then the config file,
// then brisk's default can each decide (merge()).
struct Config {
  std::optional<std::string> compute_environment;  // LOCAL_MACHINE (the only one brisk knows)
  std::optional<std::string> distributed_type;     // NO, MULTI_CPU or MULTI_GPU
  std::optional<int> num_machines;                 // hosts in the job (>= 1)
  std::optional<int> num_processes;                // processes over all hosts (>= 1)
  std::optional<int> machine_rank;                 // this host's index, 0 .. num_machines-1
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;        // 1 .. 65535
  std::optional<std::string> mixed_precision;  // no, fp16 or bf16
  std::optional<std::string> gpu_ids;          // "all" or a comma list such as "0,1"
  std::optional<bool> use_cpu;                 // run on the CPU even where GPUs are present
  std::optional<bool> debug;                   // BRISK_DEBUG: collective signature checks
  std::optional<std::string> hostfile;         // brisk: OpenMPI hostfile for multi-host jobs
  std::optional<double> timeout;               // brisk: collective timeout in seconds
  // none, zero1, zero2 or zero3 (docs/sharding.md); Accelerate's deepspeed_config.zero_stage and
  // fsdp_config.fsdp_sharding_strategy map onto it.
  std::optional<std::string> sharding;
  // brisk launch: how many times a failed job is started again (>= 0; torchrun's max_restarts).
  std::optional<int> max_restarts;
  // brisk launch: seconds a job preempted by SIGTERM or SIGUSR1 has to save and stop (> 0; 90).
  std::optional<double> preempt_grace;

  bool operator==(const Config&) const = default;
};

// One row of the key table that drives reading, writing, validation and `brisk config`'s flags.
struct ConfigKey {
  const char* name;
  const char* help;
  std::variant<std::optional<std::string> Config::*, std::optional<int> Config::*, std::optional<bool> Config::*,
               std::optional<double> Config::*>
      member;
};
const std::vector<ConfigKey>& config_keys();
// "compute_environment, distributed_type, ..." for error messages.
std::string valid_keys_text();

// Throws brisk::Error naming the key, the bad value and what is allowed. `source` prefixes messages.
void validate(const Config& c, const std::string& source = "config");

// Field by field: `high` where set, else `low` (flags over file over defaults).
Config merge(const Config& high, const Config& low);

// YAML text <-> Config. Reads Accelerate's default_config.yaml unchanged: its
// mpirun_config.mpirun_hostfile is brisk's hostfile, and the keys Accelerate writes that brisk has
// no meaning for are accepted; those set to something other than "off" are appended to `ignored`
// (for one warning). A key neither knows is an error that names it and lists the valid keys.
// The file written uses Accelerate's names, so Accelerate reads it (except brisk's own `timeout`,
// `max_restarts` and `preempt_grace`).
Config config_from_yaml(const std::string& text, const std::string& source,
                        std::vector<std::string>* ignored = nullptr);
std::string config_to_yaml(const Config& c);  // only the keys that are set, in table order

// $XDG_CONFIG_HOME/brisk/default_config.yaml, else $HOME/.config/brisk/default_config.yaml.
std::string default_config_path();
// Reads and validates a config file; throws when it is missing or wrong. `ignored`: see config_from_yaml.
Config load_config(const std::string& path, std::vector<std::string>* ignored = nullptr);
// Writes atomically (a temp file in the same folder, fsync, rename), creating the folder.
void save_config(const Config& c, const std::string& path);

// Valid values, shared by the CLI and the Accelerator.
bool is_valid_mixed_precision(const std::string& s);  // no, fp16, bf16
// Accelerate's words for a sharding stage -> brisk's (none, zero1, zero2, zero3); throws naming
// `what` and the value on anything else. zero_stage: 0..3. fsdp_sharding_strategy: NO_SHARD,
// SHARD_GRAD_OP, FULL_SHARD (or Accelerate's older numbers 3, 2, 1).
std::string sharding_from_zero_stage(int64_t stage, const std::string& what);
std::string sharding_from_fsdp_strategy(const std::string& strategy, const std::string& what);
// "all" -> empty; "0,2" -> {0, 2}; throws on anything else (negative, repeated, not a number).
std::vector<int> parse_gpu_ids(const std::string& s, const std::string& what = "gpu_ids");

}  // namespace brisk::accelerate
