// A small command-line parser shared by every brisk program: long flags in both spellings
// (--batch_size and --batch-size), `--flag value` or `--flag=value`, optional one-letter aliases,
// boolean switches, generated --help, and errors that say how to fix the call.
//
//   cli::Parser p("fashion_mnist", "Trains the example CNN on Fashion-MNIST.");
//   int epochs = 8;
//   p.add("epochs", "passes over the training set", &epochs);
//   if (!p.parse(argc, argv)) return p.exit_code();   // --help printed, or a usage error
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace brisk::cli {

class Parser {
 public:
  Parser(std::string program, std::string description);
  // Not copyable: the enum flags' setters live in the parser and its flags point at them (a move
  // keeps them where they are).
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  Parser(Parser&&) = default;
  Parser& operator=(Parser&&) = default;

  // Registers a flag bound to a variable that holds its default. Names use '_' or '-' freely.
  void add(const std::string& name, const std::string& help, int* value, char alias = 0);
  void add(const std::string& name, const std::string& help, int64_t* value, char alias = 0);
  void add(const std::string& name, const std::string& help, uint64_t* value, char alias = 0);
  void add(const std::string& name, const std::string& help, double* value, char alias = 0);
  void add(const std::string& name, const std::string& help, std::string* value, char alias = 0);
  // A switch: `--cpu` sets it true; `--cpu=false` / `--no-cpu` set it false.
  void add(const std::string& name, const std::string& help, bool* value, char alias = 0);
  // Optional targets stay empty unless the flag is given ("unset" is not the same as a default,
  // so a config file can fill what the command line left open); --help shows no default for them.
  void add(const std::string& name, const std::string& help, std::optional<int>* value, char alias = 0);
  void add(const std::string& name, const std::string& help, std::optional<double>* value, char alias = 0);
  void add(const std::string& name, const std::string& help, std::optional<std::string>* value, char alias = 0);
  void add(const std::string& name, const std::string& help, std::optional<bool>* value, char alias = 0);
  // A flag whose value `set` converts and stores, for choices kept as enums:
  //   p.add("eval_strategy", "no, steps or epoch", [&](const std::string& v) {
  //     strategy = parse_enum<IntervalStrategy>(v, "--eval_strategy"); }, "no");
  // A brisk::Error from `set` is the usage error (its message as it is). `default_text` is what
  // --help shows as the default ("": none).
  void add(const std::string& name, const std::string& help, std::function<void(const std::string&)> set,
           std::string default_text, char alias = 0);
  // Accept positional arguments (collected in positionals()); everything after the first
  // positional, or after `--`, is positional when `stop_at_first` (as `brisk launch PROGRAM ARGS`).
  void allow_positionals(const std::string& usage, bool stop_at_first = false);

  // Parses; returns false when the program should exit now (after --help: exit_code() 0; after
  // a usage error, printed to stderr with a hint: exit_code() 2).
  bool parse(int argc, const char* const* argv);
  bool parse(int argc, char** argv) { return parse(argc, const_cast<const char* const*>(argv)); }
  int exit_code() const { return exit_code_; }
  // The last usage error's message ("" after a successful parse or --help).
  const std::string& error() const { return error_; }
  // Quiet: parse() prints neither usage errors nor --help (for callers that report error() themselves).
  void set_quiet(bool quiet) { quiet_ = quiet; }
  const std::vector<std::string>& positionals() const { return positionals_; }
  // True if the flag was given on the command line (not just defaulted).
  bool given(const std::string& name) const;
  std::string help() const;

 private:
  struct Setter {
    std::function<void(const std::string&)> set;
  };
  using Target = std::variant<int*, int64_t*, uint64_t*, double*, std::string*, bool*, std::optional<int>*,
                              std::optional<double>*, std::optional<std::string>*, std::optional<bool>*, Setter*>;
  struct Flag {
    std::string name;  // canonical, with '_'
    std::string help;
    Target target;
    char alias;
    std::string default_text;
    bool given = false;
  };
  void add_flag(const std::string& name, const std::string& help, Target t, char alias, std::string default_text);
  Flag* find(const std::string& name);
  bool set(Flag& f, const std::string& value, std::string& error);
  static bool is_switch(const Flag& f);
  bool fail(const std::string& msg);

  std::string program_, description_, positional_usage_;
  std::vector<Flag> flags_;
  std::deque<Setter> setters_;  // (a deque: the flags point into it as it grows)
  std::vector<std::string> positionals_;
  bool allow_positionals_ = false, stop_at_first_ = false, quiet_ = false;
  int exit_code_ = 0;
  std::string error_;
};

// "1.5 GB/s"-style formatting helpers for progress output.
std::string format_duration(double seconds);  // "1m05s", "12.3s"

// The items of a comma-separated flag value ("mpi,ring" -> {"mpi", "ring"}), empty items dropped.
std::vector<std::string> split_comma_list(const std::string& s);

}  // namespace brisk::cli
