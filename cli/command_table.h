#pragma once
// Every command of the command line, once: its words, what --help says of it, and which
// executable runs it. `veritrain` (veritrain_main.cpp) runs the light ones itself and execs
// `veritrain-torch` for the rest (torch_forward.h); both register each command with the summary
// written here, and tests/cli/command_table_test.cpp holds docs/cli.md to the same list.

#include <string>
#include <string_view>
#include <vector>

namespace vt::cli {

enum class Runs {
  kLight,          // in `veritrain`: no LibTorch
  kTorch,          // in `veritrain-torch`
  kLightWithCost,  // `plan`: light when --cost gives the cost, else it measures (LibTorch)
  kLightForZoo,    // `task init`: light for a zoo model on synthetic data (cli/task_init.h);
                   // `veritrain` hands the rest over once it has read the flags
};

struct Command {
  std::string_view path;  // "verify", "task init"
  std::string_view summary;
  Runs runs;
};

const std::vector<Command>& command_table();

// The summary of `path` for CLI11's add_subcommand; a path not in the table is a programming
// error and aborts at start-up (every command registers at start-up, so no test misses it).
std::string summary_of(std::string_view path);

// The entry for the first one or two command words of a command line, or nullptr for a word
// that names no command.
const Command* find_command(std::string_view first, std::string_view second);

}  // namespace vt::cli
