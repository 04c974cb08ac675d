// The README's tour, run as written, so that it cannot rot: every command between the
// `<!-- tour:begin -->` and `<!-- tour:end -->` markers of README.md, in order, from an empty
// folder. Only what a CPU machine and a test runner need is replaced: `--device cuda` by
// `--device cpu`, the port 7443 by a free one, and the `<...>` value the reader copies from
// keygen's output. A command ending in `&` runs in the background (the serving provider) and
// the tour goes on once its port accepts connections; every other command must exit 0.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "tests/test_util.h"

namespace vt {
namespace {
namespace fs = std::filesystem;

// The tour's shell commands: fenced `sh` blocks between the markers, continuation lines joined,
// comments dropped.
std::vector<std::string> tour_commands(const std::string& readme) {
  const auto begin = readme.find("<!-- tour:begin -->");
  const auto end = readme.find("<!-- tour:end -->");
  if (begin == std::string::npos || end == std::string::npos || end < begin) return {};
  std::istringstream in(readme.substr(begin, end - begin));
  std::vector<std::string> commands;
  std::string line, pending;
  bool in_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block && line.find("sh") != std::string::npos;
      continue;
    }
    if (!in_block) continue;
    if (const auto hash = line.find(" #"); hash != std::string::npos) line.erase(hash);
    if (const auto first = line.find_first_not_of(' ');
        first == std::string::npos || line[first] == '#') {
      if (pending.empty()) continue;
      line.clear();
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      pending += line + " ";
      continue;
    }
    pending += line;
    if (!pending.empty()) commands.push_back(std::regex_replace(pending, std::regex(" +"), " "));
    pending.clear();
  }
  return commands;
}

bool port_accepts(std::uint16_t port) {
  const std::string probe = "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + " 2>/dev/null";
  return std::system(("bash -c '" + probe + "' 2>/dev/null").c_str()) == 0;
}

TEST(ReadmeTour, RunsAsWrittenOnCpu) {
  auto readme = read_text_file(fs::path(VT_SOURCE_DIR) / "README.md");
  ASSERT_TRUE(readme.ok());
  const std::vector<std::string> commands = tour_commands(*readme);
  ASSERT_GE(commands.size(), 10u) << "the tour markers or its sh blocks are gone from README.md";

  testing::ScratchDir dir;
  const std::uint16_t port = testing::free_port();
  const std::string env = "cd " + dir.path().string() + " && export HOME=" + dir.path().string() +
                          " XDG_CONFIG_HOME=" + (dir / ".config").string() + " && ";
  std::string pin;
  std::vector<std::unique_ptr<testing::Background>> background;
  // Built by insert, not ":" + to_string(): GCC 12 warns about the latter (-Wrestrict, a false
  // positive).
  std::string port_text = std::to_string(port);
  port_text.insert(0, ":");
  for (std::string command : commands) {
    ASSERT_EQ(command.rfind("veritrain ", 0), 0u) << "not a veritrain command: " << command;
    command.replace(0, std::string("veritrain").size(), testing::veritrain_binary());
    command = std::regex_replace(command, std::regex("--device cuda"), "--device cpu");
    command = std::regex_replace(command, std::regex(":7443\\b"), port_text);
    if (command.find('<') != std::string::npos) {
      ASSERT_FALSE(pin.empty()) << "a <...> value before keygen printed one: " << command;
      command = std::regex_replace(command, std::regex("<tls certificate sha256[^>]*>"), pin);
      ASSERT_EQ(command.find('<'), std::string::npos)
          << "a placeholder this test does not know: " << command;
    }
    SCOPED_TRACE(command);
    if (command.back() == '&') {
      command.pop_back();
      background.push_back(std::make_unique<testing::Background>(
          std::vector<std::string>{"/bin/sh", "-c", env + "exec " + command},
          dir / ("background-" + std::to_string(background.size()) + ".log")));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (!port_accepts(port) && background.back()->running() &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ASSERT_TRUE(port_accepts(port)) << *read_text_file(
          dir / ("background-" + std::to_string(background.size() - 1) + ".log"));
      continue;
    }
    const testing::CommandResult r = testing::run_command(env + command, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    if (const auto at = r.out.find("TLS certificate sha256"); at != std::string::npos) {
      std::smatch m;
      const std::string rest = r.out.substr(at);
      if (std::regex_search(rest, m, std::regex("[0-9a-f]{64}"))) pin = m.str();
    }
  }
  // What the tour promises it leaves behind.
  auto verdict = read_text_file(dir / "report/verdict.json");
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(verdict->find("\"accepted\""), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "report/report.html"));
  EXPECT_TRUE(fs::exists(dir / "evidence.json"));
  EXPECT_FALSE(fs::exists(dir / "run/keys"))
      << "train --key keys made a second identity in the workdir";
}

// The tour as a reader pastes it into one shell script: the provider started with `&` and the
// online verifier right after it, with no wait in between (the verifier waits for the provider's
// token file and port). The placeholder becomes what the reader would paste: the certificate's
// SHA-256, here computed with openssl from the file keygen wrote.
TEST(ReadmeTour, RunsAsOneShellScript) {
  auto readme = read_text_file(fs::path(VT_SOURCE_DIR) / "README.md");
  ASSERT_TRUE(readme.ok());
  testing::ScratchDir dir;
  const std::uint16_t port = testing::free_port();
  std::string port_text = std::to_string(port);
  port_text.insert(0, ":");
  std::string script = "set -e\ncd " + dir.path().string() +
                       "\nexport HOME=" + dir.path().string() +
                       " XDG_CONFIG_HOME=" + (dir / ".config").string() +
                       "\nprovider=\ntrap 'test -z \"$provider\" || kill $provider' EXIT\n";
  for (std::string command : tour_commands(*readme)) {
    command.replace(0, std::string("veritrain").size(), testing::veritrain_binary());
    command = std::regex_replace(command, std::regex("--device cuda"), "--device cpu");
    command = std::regex_replace(command, std::regex(":7443\\b"), port_text);
    command = std::regex_replace(
        command, std::regex("<tls certificate sha256[^>]*>"),
        "$(openssl x509 -in keys/tls.cert.pem -outform DER | sha256sum | cut -c1-64)");
    ASSERT_EQ(command.find('<'), std::string::npos) << "an unknown placeholder: " << command;
    if (command.back() == '&') {
      // Its output to a file: a background job holding the test's pipes would outlive the script.
      command.pop_back();
      script += command + " >provider.log 2>&1 &\nprovider=$!\n";
      continue;
    }
    script += command + "\n";
  }
  ASSERT_TRUE(write_file_atomic(dir / "tour.sh", script).ok());
  const testing::CommandResult r =
      testing::run_command("sh " + (dir / "tour.sh").string(), dir.path());
  const Result<std::string> provider_log = read_text_file(dir / "provider.log");
  ASSERT_EQ(r.exit_code, 0) << script << "\n"
                            << r.out << r.err << (provider_log.ok() ? *provider_log : "");
  auto verdict = read_text_file(dir / "report/verdict.json");
  ASSERT_TRUE(verdict.ok());
  EXPECT_NE(verdict->find("\"accepted\""), std::string::npos);
}

}  // namespace
}  // namespace vt
