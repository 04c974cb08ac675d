#include "cli/torch_forward.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  // The commands this program runs; everything else, a command added to veritrain-torch later
  // or a typo included, goes on to veritrain-torch, which knows every command.
  static const std::set<std::string> light_commands = {"keygen", "log", "inspect", "serve",
                                                       "verdict"};
  std::vector<std::string> words;  // the command words, in order
  bool plan_has_cost = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      if (words.empty()) return false;  // the list of commands: this program has it
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
  if (light_commands.count(words[0]) != 0) return false;
  if (words[0] == "task") return !(words.size() > 1 && words[1] == "show");
  if (words[0] == "plan") return !plan_has_cost;
  return true;
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
