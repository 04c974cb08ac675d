#pragma once
// `veritrain` runs the commands that need no LibTorch itself and execs `veritrain-torch` (the
// same command line, every command, LibTorch linked) for the others. Loading LibTorch costs
// about a second, registering its operators; `task show` or `--help` should not pay it.

#include <string_view>
#include <vector>

namespace vt::cli {

// The --help of a command veritrain-torch runs ("verify", "task check"), captured from
// veritrain-torch when it was built (help_texts.cmake): `veritrain verify --help` prints it
// without loading LibTorch.
struct StoredHelp {
  std::string_view command;
  std::string_view text;
};
const std::vector<StoredHelp>& stored_help_texts();

// The stored help this command line asks for (a --help or -h with the words of a stored
// command), or nullptr.
const StoredHelp* stored_help(int argc, char** argv);

// Keeps argv for exec_torch_program(); call first in main().
void remember_arguments(int argc, char** argv);

// Whether this command line is one veritrain-torch runs: every command but keygen, log, inspect,
// serve, task show and plan --cost (without --cost plan measures), and --version. A word that is
// no command goes there too, so a command added to veritrain-torch works through veritrain
// before commands_light.cpp lists it.
bool needs_torch(int argc, char** argv);

// Replaces this process with veritrain-torch (beside this executable, or $VERITRAIN_TORCH)
// and the remembered arguments. Returns only when that fails: the exit code, after a message.
int exec_torch_program();

}  // namespace vt::cli
