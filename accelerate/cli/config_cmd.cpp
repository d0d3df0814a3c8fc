// `brisk config`: asks a few questions (defaults in brackets) or takes every answer as a flag
// (--non-interactive, also used when stdin is not a terminal), then writes the YAML config.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>

#include "brisk/accelerate/config.h"
#include "brisk/accelerate/host.h"
#include "brisk/util/cli.h"
#include "brisk/util/env.h"
#include "brisk/util/error.h"
#include "commands.h"

namespace brisk::cli_commands {

using namespace brisk::accelerate;

namespace {

// One question on stdout, one answer line from stdin; empty keeps the default, a bad answer
// (check throws brisk::Error) is explained and asked again. At end of input, defaults are taken.
class Asker {
 public:
  std::string ask(const std::string& question, const std::string& def,
                  const std::function<void(const std::string&)>& check) {
    for (;;) {
      std::printf("%s [%s]: ", question.c_str(), def.c_str());
      std::fflush(stdout);
      std::string line;
      if (eof_ || !std::getline(std::cin, line)) {
        if (!eof_) std::printf("\n");
        eof_ = true;
        return def;
      }
      size_t a = line.find_first_not_of(" \t"), b = line.find_last_not_of(" \t\r");
      line = a == std::string::npos ? "" : line.substr(a, b - a + 1);
      if (line.empty()) return def;
      try {
        check(line);
        return line;
      } catch (const brisk::Error& e) {
        std::printf("  %s\n", e.message().c_str());
      }
    }
  }

 private:
  bool eof_ = false;
};

int to_int(const std::string& s, const char* what, int min) {
  const std::optional<int> v = parse_integer<int>(s);
  BRISK_CHECK(v && *v >= min, what, ": expected a whole number in [", min, ", ", std::numeric_limits<int>::max(),
              "], got '", s, "'");
  return *v;
}

bool to_bool(const std::string& s, const char* what) {
  yaml::Value v = yaml::Value::string(s);
  return v.as_bool(what);
}

}  // namespace

int config(int argc, char** argv) {
  const std::string me = argv[0];
  cli::Parser p(me, "Writes the launch configuration that `brisk launch` (and the Accelerator) read, to\n" +
                        default_config_hint() +
                        " unless --config_file says otherwise. Asks for each setting not given as a flag; with\n"
                        "--non-interactive (or when stdin is not a terminal) unset settings get their defaults.");
  bool non_interactive = false, force_interactive = false;
  std::string config_file;
  Config c;  // what the flags set; questions (or defaults) fill the rest
  p.add("non_interactive", "ask nothing: take the flags, defaults for the rest", &non_interactive);
  p.add("interactive", "ask even when stdin is not a terminal (answers piped in, one per line)", &force_interactive);
  p.add("config_file", "where to write (default: " + default_config_hint() + ")", &config_file);
  p.add("compute_environment", "LOCAL_MACHINE (the only one brisk knows)", &c.compute_environment);
  p.add("distributed_type", "NO (one process), MULTI_CPU or MULTI_GPU (default: MULTI_GPU where GPUs are seen)",
        &c.distributed_type);
  p.add("num_machines", "hosts in the job (default: 1)", &c.num_machines);
  p.add("num_processes", "processes over all hosts (default: one per GPU, else 2)", &c.num_processes, 'n');
  p.add("machine_rank", "this host's index", &c.machine_rank);
  p.add("main_process_ip", "address of the host running rank 0", &c.main_process_ip);
  p.add("main_process_port", "port on the main host", &c.main_process_port);
  p.add("mixed_precision", "no, fp16 or bf16 (default: no)", &c.mixed_precision);
  p.add("sharding", "none, zero1, zero2 or zero3 (default: none)", &c.sharding);
  p.add("gpu_ids", "GPUs to use: all, or a list such as 0,1 (default: all)", &c.gpu_ids);
  p.add("use_cpu", "run on the CPU even where GPUs are present", &c.use_cpu);
  p.add("debug", "ranks check they call the same collectives", &c.debug);
  p.add("hostfile", "OpenMPI hostfile for a multi-host job", &c.hostfile);
  p.add("timeout", "seconds a collective may take (default: the library's, 600)", &c.timeout);
  if (!p.parse(argc, argv)) return p.exit_code();

  const int gpus = usable_gpu_count();
  if (non_interactive && force_interactive)
    return fail(me, "--interactive and --non-interactive contradict each other");
  const bool interactive = force_interactive || (!non_interactive && ::isatty(STDIN_FILENO));
  Asker asker;
  try {
    validate(c, "");

    if (interactive)
      std::printf("Configuring brisk launch (press Enter to keep the [default]; flags skip their question).\n");
    auto answer = [&](auto& field, const std::string& question, const std::string& def, auto convert) {
      using T = typename std::remove_reference_t<decltype(field)>::value_type;
      if (field) return;
      if (!interactive) {
        field = static_cast<T>(convert(def));
        return;
      }
      field = static_cast<T>(convert(asker.ask(question, def, [&](const std::string& s) {
        field = static_cast<T>(convert(s));  // may throw: field stays unset
        try {
          validate(c, "");
        } catch (const brisk::Error&) {
          field = std::nullopt;
          throw;
        }
        field = std::nullopt;
      })));
    };
    auto as_text = [](const std::string& s) { return s; };

    c.compute_environment = c.compute_environment.value_or("LOCAL_MACHINE");
    if (!c.distributed_type && c.num_processes && *c.num_processes == 1) c.distributed_type = "NO";
    if (!c.distributed_type && c.use_cpu && *c.use_cpu) c.distributed_type = "MULTI_CPU";
    answer(c.distributed_type, "Which kind of job: NO (one process), MULTI_CPU or MULTI_GPU?",
           gpus > 0 ? "MULTI_GPU" : "MULTI_CPU", [](std::string s) {
             for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
             return s;
           });
    const std::string kind = *c.distributed_type;
    if (kind == "NO") {
      c.num_machines = c.num_machines.value_or(1);
      c.num_processes = c.num_processes.value_or(1);
    }
    answer(c.num_machines, "How many machines (hosts)?", "1",
           [](const std::string& s) { return to_int(s, "num_machines", 1); });
    if (*c.num_machines > 1) {
      if (!c.hostfile && !interactive)
        BRISK_THROW("num_machines is ", *c.num_machines,
                    ": pass --hostfile FILE listing the machines, one 'HOST slots=N' per line");
      answer(c.hostfile, "OpenMPI hostfile listing the machines (one 'HOST slots=N' per line)", "hosts", as_text);
    }
    int per_machine = kind == "MULTI_GPU" && gpus > 0 ? gpus : 2;
    answer(c.num_processes, "How many processes in total?", std::to_string(per_machine * *c.num_machines),
           [](const std::string& s) { return to_int(s, "num_processes", 1); });
    if (kind == "MULTI_CPU") c.use_cpu = c.use_cpu.value_or(true);
    if (kind == "MULTI_GPU" || gpus == 0) c.use_cpu = c.use_cpu.value_or(false);
    answer(c.use_cpu, "Run on the CPU only, even where GPUs are present? (yes/no)", "no",
           [](const std::string& s) { return to_bool(s, "use_cpu"); });
    if (kind == "MULTI_GPU" || (!*c.use_cpu && gpus > 0))
      answer(c.gpu_ids, "Which GPUs (all, or a list such as 0,1)?", "all", as_text);
    answer(c.mixed_precision, "Mixed precision: no, fp16 or bf16?", "no", as_text);
    answer(c.debug, "Debug mode: check that all processes call the same collectives (slower)? (yes/no)", "no",
           [](const std::string& s) { return to_bool(s, "debug"); });

    std::string path = config_file.empty() ? default_config_path() : config_file;
    save_config(c, path);
    std::printf("%sbrisk config: wrote %s\n%s", interactive ? "\n" : "", path.c_str(), config_to_yaml(c).c_str());
  } catch (const brisk::Error& e) {
    return fail(me, e.message());
  }
  return 0;
}

}  // namespace brisk::cli_commands
