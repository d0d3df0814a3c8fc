// `brisk`: the command-line front end (launch, config, env, test, plot, merge-weights, estimate-memory).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "brisk/version.h"
#include "commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"launch", brisk::cli_commands::launch, "start a program as N processes (OpenMPI), one or many hosts"},
    {"config", brisk::cli_commands::config, "write the launch configuration (asks, or takes flags)"},
    {"env", brisk::cli_commands::env, "print versions, devices and the config in force, for bug reports"},
    {"test", brisk::cli_commands::test, "run a short multi-process self-check and print a pass/fail table"},
    {"plot", brisk::cli_commands::plot, "draw the loss, accuracy and throughput curves of runs to PNG and SVG"},
    {"merge-weights", brisk::cli_commands::merge_weights, "write a checkpoint's model as one safetensors file"},
    {"estimate-memory", brisk::cli_commands::estimate_memory,
     "bytes per rank for a model under each sharding stage and precision"},
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: brisk <command> [options]\n\n"
               "brisk %s: run one training program on a CPU, a GPU, many processes or many hosts.\n\n"
               "commands:\n",
               BRISK_VERSION);
  for (const Command& c : kCommands) std::fprintf(out, "  %-16s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nRun 'brisk <command> --help' for a command's options. Long flags are accepted as\n"
               "--num_processes and --num-processes alike.\n"
               "  -h, --help     show this help\n"
               "  --version      print brisk's version\n");
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  if (name == "--version") {
    std::printf("brisk %s\n", BRISK_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    std::string program = std::string("brisk ") + c.name;
    std::vector<char*> args;
    args.push_back(program.data());
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    // A command reports its own usage errors; anything else it lets through (a bad environment
    // variable read deep inside, say) ends here as one line and exit status 1, not std::terminate.
    try {
      return c.run(argc - 1, args.data());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
      return 1;
    }
  }
  const Command* best = nullptr;
  size_t best_d = 3;  // suggest only close matches
  for (const Command& c : kCommands) {
    size_t d = edit_distance(name, c.name);
    if (d < best_d || (std::string(c.name).rfind(name, 0) == 0 && !name.empty() && name[0] != '-')) {
      best_d = std::min(d, best_d);
      best = &c;
    }
  }
  std::fprintf(stderr, "brisk: unknown command '%s'.", name.c_str());
  if (best) std::fprintf(stderr, " Did you mean 'brisk %s'?", best->name);
  std::fprintf(stderr, "\nRun 'brisk --help' to list the commands.\n");
  return 2;
}
