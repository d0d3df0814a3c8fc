// The `brisk` subcommands (one file each); main.cpp dispatches to them.
#pragma once
#include <string>

#include "brisk/accelerate/config.h"

namespace brisk::cli_commands {

// Each takes argv with argv[0] = "brisk <name>" and returns the process exit status.
int launch(int argc, char** argv);
int config(int argc, char** argv);
int env(int argc, char** argv);
int test(int argc, char** argv);
int plot(int argc, char** argv);
int merge_weights(int argc, char** argv);
int estimate_memory(int argc, char** argv);

// The config file in force: `given_path` (which must exist), else the default path when a file is
// there. Returns the path read, empty when none; throws brisk::Error for a bad file.
std::string read_config(const std::string& given_path, accelerate::Config& out);
// The default config path for help texts (never throws).
std::string default_config_hint();

// Prints "brisk <cmd>: <message>" to stderr and returns 1 (for errors the user can fix).
int fail(const std::string& command, const std::string& message);

}  // namespace brisk::cli_commands
