// One command table (cli/command_table.cpp): both executables list the same commands with the
// same summaries, and docs/cli.md and docs/architecture.md name the commands the light
// `veritrain` runs exactly as the table does.
#include "cli/command_table.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {

namespace fs = std::filesystem;

// The table's commands that run where `light` says, leaves only ("task init", not "task").
std::set<std::string> leaves(bool light) {
  std::set<std::string> out;
  for (const cli::Command& c : cli::command_table()) {
    bool has_child = false;
    for (const cli::Command& d : cli::command_table())
      has_child |= d.path.size() > c.path.size() && d.path.starts_with(std::string(c.path) + " ");
    if (has_child) continue;
    if ((c.runs != cli::Runs::kTorch) == light) out.insert(std::string(c.path));
  }
  return out;
}

// The backticked words of `text` from `from` up to `to`, minus flags; "plan --cost K" is plan.
std::set<std::string> named(const std::string& text, const std::string& from,
                            const std::string& to) {
  const std::size_t begin = text.find(from);
  const std::size_t end = text.find(to, begin);
  EXPECT_NE(begin, std::string::npos) << from;
  EXPECT_NE(end, std::string::npos) << to;
  std::set<std::string> out;
  if (begin == std::string::npos || end == std::string::npos) return out;
  const std::string part = text.substr(begin, end - begin);
  const std::regex quoted("`([^`]+)`");
  for (auto it = std::sregex_iterator(part.begin(), part.end(), quoted);
       it != std::sregex_iterator(); ++it) {
    std::string word = (*it)[1];
    // Flags, files and test names are no commands.
    if (word.rfind("--", 0) == 0 || word.find_first_of("/._") != std::string::npos) continue;
    if (const std::size_t flag = word.find(" --"); flag != std::string::npos) word.resize(flag);
    out.insert(word);
  }
  return out;
}

TEST(CommandTable, DocsNameTheLightCommandsAsTheTableDoes) {
  const std::string cli = *read_text_file(fs::path(VT_SOURCE_DIR) / "docs/cli.md");
  EXPECT_EQ(named(cli, "runs the commands that neither train nor replay", "For the\nothers"),
            leaves(true));
  // "`plan` without `--cost`" is named among the others too: it measures then; and `task init`
  // of a TorchScript module or data files, which it builds the model for.
  std::set<std::string> heavy = leaves(false);
  heavy.insert("plan");
  heavy.insert("task init");
  EXPECT_EQ(named(cli, "For the\nothers", "any word it does not know"), heavy);
  const std::string architecture =
      *read_text_file(fs::path(VT_SOURCE_DIR) / "docs/architecture.md");
  EXPECT_EQ(named(architecture, "the commands that neither train nor replay (", "it execs"),
            leaves(true));
}

// cli/CMakeLists.txt compiles into both executables (VT_CLI_SHARED) exactly the files that
// define the commands the light `veritrain` runs, and leaves the others to veritrain-torch.
TEST(CommandTable, TheBuildSplitFollowsTheTable) {
  const fs::path cli_dir = fs::path(VT_SOURCE_DIR) / "cli";
  const std::string cmake = *read_text_file(cli_dir / "CMakeLists.txt");
  const std::size_t begin = cmake.find("set(VT_CLI_SHARED");
  ASSERT_NE(begin, std::string::npos);
  const std::string list = cmake.substr(begin, cmake.find(')', begin) - begin);
  std::set<std::string> shared;
  const std::regex source("([a-z_]+\\.cpp)");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), source);
       it != std::sregex_iterator(); ++it)
    shared.insert((*it)[1]);
  // Where each command is defined: the file that registers it with its table summary.
  std::map<std::string, std::string> defined_in;
  const std::regex registers("summary_of\\(\"([a-z -]+)\"\\)");
  for (const auto& entry : fs::directory_iterator(cli_dir)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".cpp" || file == "commands_light.cpp" ||
        file == "command_table.cpp")
      continue;
    const std::string text = *read_text_file(entry.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), registers);
         it != std::sregex_iterator(); ++it)
      defined_in[(*it)[1]] = file;
  }
  for (const bool light : {true, false}) {
    for (const std::string& command : leaves(light)) {
      ASSERT_TRUE(defined_in.count(command)) << command << " is registered nowhere";
      EXPECT_EQ(shared.count(defined_in[command]) == 1, light)
          << command << " (" << defined_in[command] << ") runs "
          << (light ? "in both executables" : "in veritrain-torch only") << ", so its file is "
          << (light ? "" : "not ") << "in VT_CLI_SHARED";
    }
  }
}

// cli/help_texts.cmake stores the --help of exactly the commands `veritrain` hands over (and
// plan, which it hands over without --cost), and commands_light.cpp lists each of them: a command
// added to the table and forgotten in either fails here, named.
TEST(CommandTable, TheHandedOverCommandsAreTheTablesEverywhere) {
  std::set<std::string> handed = leaves(false);
  handed.insert("plan");
  const fs::path cli_dir = fs::path(VT_SOURCE_DIR) / "cli";
  const std::string cmake = *read_text_file(cli_dir / "help_texts.cmake");
  const std::size_t begin = cmake.find("set(paths");
  ASSERT_NE(begin, std::string::npos);
  const std::string list = cmake.substr(begin, cmake.find(')', begin) - begin);
  std::set<std::string> stored;
  const std::regex quoted("\"([a-z ]+)\"");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), quoted);
       it != std::sregex_iterator(); ++it)
    stored.insert((*it)[1]);
  EXPECT_EQ(stored, handed) << "cli/help_texts.cmake's paths";
  const std::string light = *read_text_file(cli_dir / "commands_light.cpp");
  std::set<std::string> listed;
  const std::regex lists("listed\\([^,]+, \"[a-z]+\", \"([a-z ]+)\"\\)");
  for (auto it = std::sregex_iterator(light.begin(), light.end(), lists);
       it != std::sregex_iterator(); ++it)
    listed.insert((*it)[1]);
  EXPECT_EQ(listed, leaves(false)) << "cli/commands_light.cpp's listed(...) commands";
}

TEST(CommandTable, BothExecutablesListTheSameCommandsAndSummaries) {
  testing::ScratchDir dir;
  const std::string light = testing::veritrain_binary();
  const std::string torch = (fs::path(light).parent_path() / "veritrain-torch").string();
  for (const std::string group : {"", " task", " log", " verdict"}) {
    const auto a = testing::run_command(light + group + " --help", dir.path());
    const auto b = testing::run_command(torch + group + " --help", dir.path());
    EXPECT_EQ(a.exit_code, 0) << group;
    EXPECT_EQ(a.out, b.out) << "veritrain" << group << " --help";
  }
  for (const cli::Command& c : cli::command_table()) {
    const auto help = testing::run_command(light + " --help", dir.path());
    if (c.path.find(' ') == std::string_view::npos) {
      EXPECT_NE(help.out.find(std::string(c.summary)), std::string::npos) << c.path;
    }
  }
}

}  // namespace
}  // namespace vt
