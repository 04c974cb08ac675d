#include "cli/torch_forward.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command_table.h"

namespace vt::cli {
namespace {

std::vector<char*> g_argv;

bool has_json_flag() {
  for (std::size_t i = 1; i < g_argv.size() && g_argv[i] != nullptr; ++i) {
    if (std::strcmp(g_argv[i], "--") == 0) break;
    if (std::strcmp(g_argv[i], "--json") == 0) return true;
  }
  return false;
}

}  // namespace

void remember_arguments(int argc, char** argv) {
  g_argv.assign(argv, argv + argc + 1);
}  // with the null

bool needs_torch(int argc, char** argv) {
  // command_table() says where each command runs; everything else, a command added to
  // veritrain-torch later or a typo included, goes on to veritrain-torch, which knows every
  // command.
  std::vector<std::string> words;  // the command words, in order
  bool plan_has_cost = false, help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      if (words.empty()) return false;  // the list of commands: this program has it
      help = true;
      continue;
    }
    if (a == "--version" && words.empty()) return true;
    if (a == "--log-level") {
      ++i;
      continue;
    }
    if (a == "--cost" || a.rfind("--cost=", 0) == 0) plan_has_cost = true;
    if (a.rfind('-', 0) == 0) continue;
    if (words.size() < 2) words.push_back(a);
  }
  if (words.empty()) return false;  // no command: usage (or a flag error) from this program
  const Command* command = find_command(words[0], words.size() > 1 ? words[1] : "");
  if (command == nullptr) return true;
  // A group's own --help (`task --help`) lists its subcommands, which this program registers.
  if (help && words.size() == 1 && command->runs == Runs::kLight) return false;
  switch (command->runs) {
    case Runs::kLight:
      // `task` holds torch subcommands (task init): a word after it that names none of its
      // light ones goes on, so that veritrain-torch's did-you-mean answers a typo.
      return command->path == "task" && words.size() > 1;
    case Runs::kLightWithCost:
      return !plan_has_cost;
    case Runs::kTorch:
      break;
  }
  return true;
}

const StoredHelp* stored_help(int argc, char** argv) {
  bool help = false;
  std::string words;  // the command words, space-separated
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-h") help = true;
    if (a == "--log-level") ++i;
    if (a.rfind('-', 0) == 0) continue;
    words += (words.empty() ? "" : " ") + a;
  }
  if (!help) return nullptr;
  // The longest stored command the words start with: `task init --model mlp --help` is task
  // init's. A value word after the command ("--out x") cannot make a longer match.
  const StoredHelp* best = nullptr;
  for (const StoredHelp& h : stored_help_texts()) {
    const bool starts = words.rfind(h.command, 0) == 0 &&
                        (words.size() == h.command.size() || words[h.command.size()] == ' ');
    if (starts && (best == nullptr || h.command.size() > best->command.size())) best = &h;
  }
  return best;
}

int exec_torch_program() {
  std::filesystem::path program;
  if (const char* env = std::getenv("VERITRAIN_TORCH"); env != nullptr && *env != '\0') {
    program = env;
  } else {
    std::error_code ec;
    program = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "veritrain-torch";
  }
  std::vector<char*> argv = g_argv;
  std::string name = program.string();
  if (argv.empty()) argv = {nullptr};
  argv[0] = name.data();
  ::execv(name.c_str(), argv.data());
  const std::string message =
      "this command needs LibTorch, which lives in " + name + " (" + std::strerror(errno) +
      "); install veritrain-torch next to veritrain, or name it with VERITRAIN_TORCH";
  if (has_json_flag()) {
    std::cout << nlohmann::json{{"ok", false},
                                {"kind", "error"},
                                {"error", message},
                                {"exit_code", 3}}
                     .dump()
              << std::endl;
  }
  std::cerr << "veritrain: error: " << message << "\n";
  return 3;
}

}  // namespace vt::cli
