// The launch config file: keys, validation, unknown-key errors, default path, atomic save, and
// the precedence flag > config file > default.
#include <brisk/accelerate/config.h>
#include <brisk/accelerate/launch.h>
#include <brisk/core/error.h>
#include <gtest/gtest.h>
#include <unistd.h>

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
  Config c = full_config();
  std::string text = config_to_yaml(c);
  EXPECT_NE(text.find("mixed_precision: 'no'\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_ids: 0,1,2,3\n"), std::string::npos) << text;
  EXPECT_EQ(config_from_yaml(text, "t"), c);
}

TEST(Config, WritesOnlyTheKeysThatAreSet) {
  Config c;
  c.num_processes = 4;
  std::string text = config_to_yaml(c);
  EXPECT_NE(text.find("num_processes: 4\n"), std::string::npos);
  EXPECT_EQ(text.find("mixed_precision"), std::string::npos);
  EXPECT_EQ(config_from_yaml(text, "t"), c);
}

TEST(Config, ReadsAnAccelerateStyleFile) {
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
  std::string e =
      error_of([] { config_from_yaml("num_processes: 2\nnum_procs: 3\ndowncast_bf16: 'no'\n", "my.yaml"); });
  EXPECT_NE(e.find("my.yaml: unknown keys 'num_procs' (line 2), 'downcast_bf16' (line 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("valid keys: compute_environment, distributed_type, num_machines, num_processes"), std::string::npos)
      << e;
}

TEST(Config, BadValuesNameTheKeyTheValueAndWhatIsAllowed) {
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
