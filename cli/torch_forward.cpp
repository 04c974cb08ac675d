#include "cli/torch_forward.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/app.h"
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

namespace {

// What needs_torch() and stored_help() read of a command line, in one pass.
struct CommandLine {
  std::vector<std::string> words;  // every word that is no flag (command words, then values)
  bool help = false;               // --help or -h anywhere
  // Decided by the first --help (false: the list of commands is here) or --version (true) that
  // comes before any word.
  std::optional<bool> before_words;
  bool cost = false;  // --cost given (plan runs light then)
};

CommandLine scan(int argc, char** argv) {
  CommandLine c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      c.help = true;
      if (c.words.empty() && !c.before_words) c.before_words = false;
      continue;
    }
    if (a == "--version" && c.words.empty() && !c.before_words) c.before_words = true;
    if (a == "--log-level") {
      ++i;
      continue;
    }
    if (a == "--cost" || a.rfind("--cost=", 0) == 0) c.cost = true;
    if (a.rfind('-', 0) == 0) continue;
    c.words.push_back(a);
  }
  return c;
}

}  // namespace

bool needs_torch(int argc, char** argv) {
  // command_table() says where each command runs; everything else, a command added to
  // veritrain-torch later or a typo included, goes on to veritrain-torch, which knows every
  // command.
  const CommandLine line = scan(argc, argv);
  const std::vector<std::string>& words = line.words;
  if (line.before_words) return *line.before_words;
  if (words.empty()) return false;  // no command: usage (or a flag error) from this program
  const Command* command = find_command(words[0], words.size() > 1 ? words[1] : "");
  if (command == nullptr) return true;
  // A group's own --help (`task --help`) lists its subcommands, which this program registers.
  if (line.help && words.size() == 1 && command->runs == Runs::kLight) return false;
  switch (command->runs) {
    case Runs::kLight:
      // `task` holds torch subcommands (task check): a word after it that names none of its
      // light ones goes on, so that veritrain-torch's did-you-mean answers a typo.
      return command->path == "task" && words.size() > 1;
    case Runs::kLightWithCost:
      return !line.cost;
    case Runs::kLightForZoo:  // decided once its flags are read (cli/task_init.h)
      return false;
    case Runs::kTorch:
      break;
  }
  return true;
}

const StoredHelp* stored_help(int argc, char** argv) {
  const CommandLine line = scan(argc, argv);
  if (!line.help) return nullptr;
  std::string words;  // the command words, space-separated
  for (const std::string& w : line.words) words += (words.empty() ? "" : " ") + w;
  // The longest stored command the words start with: `task check --task t.json --help` is task
  // check's. A value word after the command ("--out x") cannot make a longer match.
  const StoredHelp* best = nullptr;
  for (const StoredHelp& h : stored_help_texts()) {
    const bool starts = words.rfind(h.command, 0) == 0 &&
                        (words.size() == h.command.size() || words[h.command.size()] == ' ');
    if (starts && (best == nullptr || h.command.size() > best->command.size())) best = &h;
  }
  return best;
}

int exec_torch_program() {
  const std::filesystem::path program = torch_program();
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
