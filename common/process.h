#pragma once
// A child process with its stdout and stderr in a file, ended (SIGTERM, then waited for) when
// the object goes away: the demo's provider, and the providers that tests verify.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace vt {

class ChildProcess {
 public:
  // argv[0] is a path (no PATH search); output is truncated and receives both streams.
  static Result<ChildProcess> spawn(const std::vector<std::string>& argv, const std::filesystem::path& output);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  bool running() const;
  int wait();       // exit code, or 128 + the signal that ended it
  int terminate();  // SIGTERM, then wait()

 private:
  ChildProcess() = default;
  int pid_ = -1;
};

// A loopback TCP port that was free a moment ago (bound, read back, released).
Result<std::uint16_t> free_loopback_port();

}  // namespace vt
