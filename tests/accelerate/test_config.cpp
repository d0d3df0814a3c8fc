// The launch config file: keys, validation, unknown-key errors, default path, atomic save, and
// the precedence flag > config file > default.
#include <brisk/accelerate/config.h>
#include <brisk/accelerate/launch.h>
#include <brisk/accelerate/yaml.h>
#include <brisk/util/error.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>

#include "common/errors.h"

using namespace brisk::accelerate;
using brisk::testing::error_of;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the test's temp dir, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "brisk-config-test-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (const char* o = std::getenv(name.c_str())) old = o;
    value ? ::setenv(name.c_str(), value, 1) : ::unsetenv(name.c_str());
  }
  ~ScopedEnv() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
};

Config full_config() {
  Config c;
  c.compute_environment = "LOCAL_MACHINE";
  c.distributed_type = "MULTI_GPU";
  c.num_machines = 2;
  c.num_processes = 8;
  c.machine_rank = 1;
  c.main_process_ip = "10.0.0.1";
  c.main_process_port = 29500;
  c.mixed_precision = "no";
  c.gpu_ids = "0,1,2,3";
  c.use_cpu = false;
  c.debug = true;
  c.hostfile = "/etc/brisk hosts";
  c.timeout = 12.5;
  return c;
}
}  // namespace

TEST(Config, RoundTripsThroughYaml) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  Config c = full_config();
  std::string text = config_to_yaml(c);
  EXPECT_NE(text.find("mixed_precision: 'no'\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_ids: 0,1,2,3\n"), std::string::npos) << text;
  EXPECT_EQ(config_from_yaml(text, "t"), c);
}

TEST(Config, WritesOnlyTheKeysThatAreSet) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  Config c;
  c.num_processes = 4;
  std::string text = config_to_yaml(c);
  EXPECT_NE(text.find("num_processes: 4\n"), std::string::npos);
  EXPECT_EQ(text.find("mixed_precision"), std::string::npos);
  EXPECT_EQ(config_from_yaml(text, "t"), c);
}

TEST(Config, ReadsAnAccelerateStyleFile) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  Config c = config_from_yaml(
      "compute_environment: LOCAL_MACHINE\n"
      "distributed_type: MULTI_CPU\n"
      "machine_rank: 0\n"
      "main_process_ip: null\n"
      "main_process_port: null\n"
      "mixed_precision: 'no'\n"
      "num_machines: 1\n"
      "num_processes: 2\n"
      "use_cpu: true\n",
      "accelerate.yaml");
  EXPECT_EQ(c.num_processes, 2);
  EXPECT_EQ(c.mixed_precision, "no");
  EXPECT_FALSE(c.main_process_ip.has_value());  // null is unset
  EXPECT_EQ(c.use_cpu, true);
}

TEST(Config, UnknownKeysAreAnErrorNamingEachAndListingTheValidOnes) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  std::string e =
      error_of([] { config_from_yaml("num_processes: 2\nnum_procs: 3\nrdzv_backendd: static\n", "my.yaml"); });
  EXPECT_NE(e.find("my.yaml: unknown keys 'num_procs' (line 2), 'rdzv_backendd' (line 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("valid keys: compute_environment, distributed_type, num_machines, num_processes"), std::string::npos)
      << e;
}

// What `accelerate config` writes for a two-host CPU job with DeepSpeed answered, unchanged: nested
// sections, lists, quoted 'no'. brisk reads what it uses, names the settings it ignores once, and
// stays quiet about those Accelerate writes when a feature is off.
// Accelerate's DeepSpeed and FSDP sections map onto brisk's sharding; brisk's own key too; a
// contradiction or a value brisk has no stage for is an error naming the key and the value.
TEST(Config, ShardingFromAccelerateSections) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  EXPECT_EQ(config_from_yaml("deepspeed_config:\n  zero_stage: 1\n", "a.yaml").sharding, "zero1");
  EXPECT_EQ(config_from_yaml("deepspeed_config:\n  zero_stage: 3\n", "a.yaml").sharding, "zero3");
  EXPECT_EQ(config_from_yaml("deepspeed_config:\n  zero_stage: 0\n", "a.yaml").sharding, "none");
  EXPECT_EQ(config_from_yaml("fsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n", "a.yaml").sharding, "zero3");
  EXPECT_EQ(config_from_yaml("fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n", "a.yaml").sharding, "zero2");
  EXPECT_EQ(config_from_yaml("fsdp_config:\n  fsdp_sharding_strategy: NO_SHARD\n", "a.yaml").sharding, "none");
  EXPECT_EQ(config_from_yaml("sharding: zero2\n", "a.yaml").sharding, "zero2");
  EXPECT_EQ(config_from_yaml("distributed_type: DEEPSPEED\n", "a.yaml").distributed_type, "DEEPSPEED");
  std::vector<std::string> ignored;
  config_from_yaml("fsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n  fsdp_offload_params: true\n", "a.yaml",
                   &ignored);
  EXPECT_EQ(ignored, (std::vector<std::string>{"fsdp_config.fsdp_offload_params"}));
  std::string e = error_of([] { config_from_yaml("deepspeed_config:\n  zero_stage: 4\n", "a.yaml"); });
  EXPECT_NE(e.find("a.yaml:2: deepspeed_config.zero_stage: expected a ZeRO stage 0, 1, 2 or 3, got 4"),
            std::string::npos)
      << e;
  e = error_of([] { config_from_yaml("fsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\n", "a.yaml"); });
  EXPECT_NE(e.find("fsdp_sharding_strategy: expected NO_SHARD, SHARD_GRAD_OP or FULL_SHARD, got 'HYBRID_SHARD'"),
            std::string::npos)
      << e;
  e = error_of([] { config_from_yaml("sharding: zero1\ndeepspeed_config:\n  zero_stage: 2\n", "a.yaml"); });
  EXPECT_NE(e.find("asks for sharding 'zero2' but sharding is 'zero1'"), std::string::npos) << e;
  e = error_of([] { config_from_yaml("sharding: zero9\n", "a.yaml"); });
  EXPECT_NE(e.find("sharding"), std::string::npos) << e;
  EXPECT_NE(e.find("zero9"), std::string::npos) << e;
}

TEST(Config, ReadsAccelerateDefaultConfigUnchanged) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  const std::string text =
      "compute_environment: LOCAL_MACHINE\n"
      "debug: false\n"
      "deepspeed_config:\n"
      "  gradient_accumulation_steps: 1\n"
      "  zero3_init_flag: false\n"
      "  zero_stage: 2\n"
      "distributed_type: MULTI_CPU\n"
      "downcast_bf16: 'no'\n"
      "enable_cpu_affinity: false\n"
      "ipex_config:\n"
      "  ipex: false\n"
      "machine_rank: 0\n"
      "main_process_ip: 10.0.0.1\n"
      "main_process_port: 29500\n"
      "main_training_function: main\n"
      "mixed_precision: bf16\n"
      "mpirun_config:\n"
      "  mpirun_ccl: '1'\n"
      "  mpirun_hostfile: /etc/brisk/hosts\n"
      "num_machines: 2\n"
      "num_processes: 4\n"
      "rdzv_backend: static\n"
      "same_network: true\n"
      "tpu_env: []\n"
      "tpu_use_cluster: false\n"
      "tpu_use_sudo: false\n"
      "use_cpu: true\n";
  std::vector<std::string> ignored;
  Config c = config_from_yaml(text, "default_config.yaml", &ignored);
  EXPECT_EQ(c.num_machines, 2);
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_EQ(c.hostfile, "/etc/brisk/hosts");
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_EQ(c.main_process_ip, "10.0.0.1");
  EXPECT_EQ(c.main_process_port, 29500);
  EXPECT_EQ(c.use_cpu, true);
  // deepspeed_config.zero_stage is honoured (docs/sharding.md); the section's other keys are not.
  EXPECT_EQ(c.sharding, "zero2");
  EXPECT_EQ(ignored,
            (std::vector<std::string>{"deepspeed_config.gradient_accumulation_steps", "mpirun_config.mpirun_ccl"}));
  // A value brisk cannot honour in a key it knows is still an error naming what is allowed.
  std::string e = error_of([] { config_from_yaml("distributed_type: XLA\n", "a.yaml"); });
  EXPECT_NE(e.find("a.yaml: distributed_type: expected NO, MULTI_CPU, MULTI_GPU, DEEPSPEED or FSDP, got 'XLA'"),
            std::string::npos)
      << e;
  e = error_of([] { config_from_yaml("mpirun_config: [a]\n", "a.yaml"); });
  EXPECT_NE(e.find("mpirun_config: expected a mapping"), std::string::npos) << e;
  e = error_of([] { config_from_yaml("hostfile: a\nmpirun_config:\n  mpirun_hostfile: b\n", "a.yaml"); });
  EXPECT_NE(e.find("a.yaml:3: mpirun_config.mpirun_hostfile: 'b' differs from hostfile 'a'"), std::string::npos) << e;
  e = error_of([] { config_from_yaml("num_processes: [1, 2]\n", "a.yaml"); });
  EXPECT_NE(e.find("a.yaml:1: num_processes: expected an integer, got a list"), std::string::npos) << e;
}

// Accelerate's loader refuses keys its ClusterConfig lacks and needs distributed_type: the file
// brisk writes uses Accelerate's names (the hostfile as mpirun_config.mpirun_hostfile).
TEST(Config, WrittenFileUsesAccelerateNames) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  Config c = full_config();
  c.timeout.reset();  // brisk's own key: the one thing Accelerate would not read
  c.hostfile = "/etc/hosts list";
  c.sharding = "zero2";
  const std::string text = config_to_yaml(c);
  EXPECT_NE(text.find("mpirun_config:\n  mpirun_hostfile: /etc/hosts list\n"), std::string::npos) << text;
  EXPECT_NE(text.find("deepspeed_config:\n  zero_stage: 2\n"), std::string::npos) << text;
  const std::vector<std::string> accelerate_fields = {
      "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
      "num_processes",       "machine_rank",     "num_machines",    "gpu_ids", "main_process_ip",
      "main_process_port",   "mpirun_config",    "deepspeed_config"};
  for (const auto& [key, v] : brisk::accelerate::yaml::parse(text, "t"))
    EXPECT_NE(std::find(accelerate_fields.begin(), accelerate_fields.end(), key), accelerate_fields.end()) << key;
  EXPECT_EQ(config_from_yaml(text, "t"), c);
  c.sharding = "none";  // zero_stage 0, read back as none
  EXPECT_EQ(config_from_yaml(config_to_yaml(c), "t"), c);
}

TEST(Config, BadValuesNameTheKeyTheValueAndWhatIsAllowed) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  EXPECT_NE(error_of([] {
              config_from_yaml("mixed_precision: fp8\n", "c.yaml");
            }).find("c.yaml: mixed_precision: 'fp8' is not valid; expected one of: no, fp16, bf16"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              config_from_yaml("num_processes: two\n", "c.yaml");
            }).find("c.yaml:1: num_processes: expected an integer, got 'two'"),
            std::string::npos);
  EXPECT_NE(error_of([] { config_from_yaml("num_processes: 0\n", "c.yaml"); }).find("at least 1"), std::string::npos);
  EXPECT_NE(error_of([] { config_from_yaml("gpu_ids: 0,x\n", "c.yaml"); }).find("gpu_ids: expected 'all'"),
            std::string::npos);
  EXPECT_NE(error_of([] { config_from_yaml("gpu_ids: 1,1\n", "c.yaml"); }).find("listed twice"), std::string::npos);
  EXPECT_NE(error_of([] {
              config_from_yaml("distributed_type: NO\nnum_processes: 4\n", "c.yaml");
            }).find("NO means one process"),
            std::string::npos);
  EXPECT_NE(error_of([] { config_from_yaml("num_machines: 2\nmachine_rank: 2\n", "c.yaml"); }).find("machine_rank"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { config_from_yaml("compute_environment: AMAZON_SAGEMAKER\n", "c.yaml"); }).find("LOCAL_MACHINE"),
      std::string::npos);
  EXPECT_NE(error_of([] { config_from_yaml("timeout: -1\n", "c.yaml"); }).find("positive"), std::string::npos);
  EXPECT_NE(error_of([] { config_from_yaml("main_process_port: 70000\n", "c.yaml"); }).find("1..65535"),
            std::string::npos);
}

// Integers are exact and range-checked against the field, booleans take one set of words; every
// error names the file, the line and the key.
TEST(Config, IntegersAreExactAndBooleansHaveOneSpelling) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  for (const char* bad : {"num_processes: 3000000000\n", "num_processes: 99999999999999999999\n",
                          "num_processes: 1e3\n", "num_processes: 0x10\n", "num_processes: 4.0\n"}) {
    const std::string msg = error_of([&] { config_from_yaml(bad, "c.yaml"); });
    EXPECT_NE(msg.find("c.yaml:1: num_processes"), std::string::npos) << bad << ": " << msg;
  }
  EXPECT_EQ(*config_from_yaml("num_processes: +4\n", "c.yaml").num_processes, 4);
  for (const char* on : {"TRUE", "true", "True", "yes", "On", "1"})
    EXPECT_TRUE(*config_from_yaml(std::string("use_cpu: ") + on + "\n", "c.yaml").use_cpu) << on;
  for (const char* off : {"FALSE", "no", "OFF", "0"})
    EXPECT_FALSE(*config_from_yaml(std::string("debug: ") + off + "\n", "c.yaml").debug) << off;
  const std::string msg = error_of([] { config_from_yaml("debug: maybe\n", "c.yaml"); });
  EXPECT_NE(msg.find("c.yaml:1: debug"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'maybe'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("yes/no"), std::string::npos) << msg;
}

TEST(Config, GpuIdsParseAsAllOrAList) {
  EXPECT_TRUE(parse_gpu_ids("all").empty());
  EXPECT_EQ(parse_gpu_ids("2, 0"), (std::vector<int>{2, 0}));
  EXPECT_EQ(parse_gpu_ids("3"), (std::vector<int>{3}));
  EXPECT_THROW(parse_gpu_ids("-1"), brisk::Error);
  EXPECT_THROW(parse_gpu_ids(""), brisk::Error);
}

TEST(Config, DefaultPathHonoursXdgConfigHomeThenHome) {
  {
    ScopedEnv xdg("XDG_CONFIG_HOME", "/x/cfg");
    EXPECT_EQ(default_config_path(), "/x/cfg/brisk/default_config.yaml");
  }
  ScopedEnv xdg("XDG_CONFIG_HOME", nullptr);
  ScopedEnv home("HOME", "/home/u");
  EXPECT_EQ(default_config_path(), "/home/u/.config/brisk/default_config.yaml");
}

TEST(Config, SaveCreatesTheFolderReplacesAtomicallyAndLoadsBack) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  TempDir dir;
  std::string path = (dir.path / "nested" / "default_config.yaml").string();
  Config c = full_config();
  save_config(c, path);
  EXPECT_EQ(load_config(path), c);
  Config d;
  d.num_processes = 3;
  save_config(d, path);
  EXPECT_EQ(load_config(path), d);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "nested")) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // no temp file left behind
}

TEST(Config, SaveRefusesAnInvalidConfigAndKeepsTheOldFile) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  TempDir dir;
  std::string path = (dir.path / "c.yaml").string();
  Config good;
  good.num_processes = 2;
  save_config(good, path);
  Config bad;
  bad.mixed_precision = "fp4";
  EXPECT_THROW(save_config(bad, path), brisk::Error);
  EXPECT_EQ(load_config(path), good);
}

TEST(Config, LoadingAMissingFileSaysHowToWriteOne) {
  if (!brisk::accelerate::yaml::available()) GTEST_SKIP() << "built without yaml-cpp";
  std::string e = error_of([] { load_config("/nonexistent/brisk.yaml"); });
  EXPECT_NE(e.find("cannot read '/nonexistent/brisk.yaml'"), std::string::npos) << e;
  EXPECT_NE(e.find("brisk config --config_file"), std::string::npos) << e;
}

TEST(ConfigPrecedence, FlagBeatsConfigFileBeatsDefault) {
  Config file;
  file.num_processes = 4;
  file.mixed_precision = "fp16";
  file.timeout = 30;
  Config flags;
  flags.mixed_precision = "bf16";
  Config merged = merge(flags, file);
  EXPECT_EQ(merged.mixed_precision, "bf16");  // flag
  EXPECT_EQ(merged.num_processes, 4);         // file
  EXPECT_EQ(merged.timeout, 30.0);            // file
  LaunchSettings s = resolve_launch(merged, HostFacts{.is_root = false, .cpu_cores = 2, .gpu_count = 0});
  EXPECT_EQ(s.num_processes, 4);
  EXPECT_EQ(s.mixed_precision, "bf16");
  EXPECT_EQ(s.num_machines, 1);         // default
  EXPECT_FALSE(s.use_cpu.has_value());  // unset stays unset: the program's Accelerator decides
  flags.num_processes = 3;
  EXPECT_EQ(resolve_launch(merge(flags, file), {}).num_processes, 3);
}
