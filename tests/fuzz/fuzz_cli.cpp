// Fuzzes core's command-line parser (brisk::cli::Parser): the input is split at NUL bytes and
// newlines into argv[1..]; a parser with flags of every type (plain, optional, switches, aliases,
// positionals) must either accept it or report a usage error, never crash. Accepted integers
// must print back as the text given (up to a '+' sign), so nothing is rounded or wrapped.
#include <brisk/util/cli.h>
#include <brisk/util/error.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

bool same_integer(const std::string& given, const std::string& printed) {
  std::string g = given;
  if (!g.empty() && g[0] == '+') g.erase(0, 1);
  if (g == "-0") g = "0";
  return g == printed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"prog"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (size) args.push_back(cur);
  if (args.size() > 4096) return 0;
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  int epochs = 3;
  int64_t steps = 0;
  uint64_t seed = 0;
  double lr = 0.1;
  std::string name = "x";
  bool cpu = false;
  std::optional<int> procs;
  std::optional<double> timeout;
  std::optional<std::string> mp;
  std::optional<bool> debug;
  try {
    brisk::cli::Parser p("prog", "fuzzed");
    p.set_quiet(true);
    p.add("epochs", "e", &epochs, 'e');
    p.add("max_steps", "s", &steps);
    p.add("seed", "s", &seed);
    p.add("lr", "l", &lr);
    p.add("name", "n", &name, 'n');
    p.add("cpu", "c", &cpu, 'c');
    p.add("num_processes", "p", &procs, 'p');
    p.add("timeout", "t", &timeout);
    p.add("mixed_precision", "m", &mp);
    p.add("debug", "d", &debug);
    if (size && data[0] & 1) p.allow_positionals("PROGRAM [ARGS...]", (data[0] & 2) != 0);
    const bool ok = p.parse(static_cast<int>(argv.size()), argv.data());
    if (!ok && p.exit_code() != 0 && p.error().empty()) __builtin_trap();
    if (ok && !(data[0] & 1)) {
      // The last value given for an integer flag is held exactly.
      for (size_t i = 1; i < args.size(); ++i) {
        for (const char* flag : {"--seed=", "--max_steps=", "--max-steps="}) {
          const std::string f = flag;
          if (args[i].rfind(f, 0) != 0) continue;
          bool later = false;
          for (size_t j = i + 1; j < args.size(); ++j)
            later |= args[j].rfind("--seed", 0) == 0 || args[j].rfind("--max", 0) == 0 || args[j] == "--";
          if (later) continue;
          const std::string printed = f[2] == 's' ? std::to_string(seed) : std::to_string(steps);
          if (!same_integer(args[i].substr(f.size()), printed)) __builtin_trap();
        }
      }
    }
    if (!ok && p.exit_code() == 0 && p.help().empty()) __builtin_trap();  // --help
  } catch (const brisk::Error&) {
  }
  return 0;
}
