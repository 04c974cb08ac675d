#pragma once
// Helpers shared by the test suites: scratch folders and running the veritrain binary.

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/process.h"

namespace vt::testing {

// A fresh folder under the system temp dir, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("vt-") + (info ? info->test_suite_name() : "t") + "-" +
                       (info ? info->name() : "x") + "-" + std::to_string(::getpid());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& leaf) const { return path_ / leaf; }

 private:
  std::filesystem::path path_;
};

// Seconds from `start` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Names a parameterised test after its value, as GoogleTest prints it, in the letters, digits
// and '_' a test name may hold ("resnet18", `"optimizer":{"lr":-1}` -> optimizer_lr_1). ctest
// lists the tests without GoogleTest's `# GetParam() = ...` comment (tests/CMakeLists.txt), which
// for a struct is its bytes and pointers and so differs from build to build.
struct ValueName {
  template <class T>
  std::string operator()(const ::testing::TestParamInfo<T>& info) const {
    std::string name;
    for (const char c : ::testing::PrintToString(info.param)) {
      if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
        name += c;
      } else if (!name.empty() && name.back() != '_') {
        name += '_';
      }
    }
    while (!name.empty() && name.back() == '_') name.pop_back();
    return name;
  }
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs a shell command line, capturing stdout and stderr through files in `scratch`.
CommandResult run_command(const std::string& command_line, const std::filesystem::path& scratch);

inline std::string veritrain_binary() { return VT_BINARY; }
inline bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace vt::testing

namespace vt::testing {

// A background process (a provider serving while a test verifies); stopped with SIGTERM when
// the object goes away.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const std::filesystem::path& log)
      : child_(ChildProcess::spawn(argv, log)) {}
  bool running() const { return child_.ok() && child_->running(); }
  int wait() { return child_.ok() ? child_->wait() : -1; }

 private:
  Result<ChildProcess> child_;
};

// A loopback TCP port that was free a moment ago.
inline std::uint16_t free_port() {
  auto port = free_loopback_port();
  return port.ok() ? *port : 0;
}

}  // namespace vt::testing
