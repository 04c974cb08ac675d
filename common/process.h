#pragma once
// A child process with its stdout and stderr in a file, ended (SIGTERM, then waited for) when
// the object goes away: the demo's provider, and the providers that tests verify. Or one that
// talks in lines over a socket on its stdin and stdout (stderr in the file): the long-lived
// replay workers of `verify --jobs`.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.h"
#include "common/result.h"

namespace vt {

class ChildProcess {
 public:
  // args[0] is a path (no PATH search); output is truncated and receives both streams.
  // `pass_fd`, when given, becomes the child's descriptor 3 (say `serve --listen fd:3`).
  // `env`: "NAME=value" entries that the child's environment has besides (or instead of) this
  // process's own.
  static Result<ChildProcess> spawn(const std::vector<std::string>& args,
                                    const std::filesystem::path& output, int pass_fd = -1,
                                    const std::vector<std::string>& env = {});
  // As spawn, but the child's stdin and stdout are one end of a socket pair, this object holds
  // the other (for write_line and read_line); only stderr goes to `output`.
  static Result<ChildProcess> spawn_talking(const std::vector<std::string>& args,
                                            const std::filesystem::path& output,
                                            const std::vector<std::string>& env = {});
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  bool running() const;
  int wait();  // exit code, or 128 + the signal that ended it (a talking child: after end of input)
  int terminate();  // SIGTERM, then wait()

  // A spawn_talking child only. write_line appends '\n'; a child that is gone is an I/O error,
  // never a SIGPIPE. read_line blocks for one line (without its '\n') of at most `max` bytes;
  // end of stream (the child exited) is an I/O error.
  Status write_line(std::string_view line);
  Result<std::string> read_line(std::size_t max = 1 << 16);

 private:
  ChildProcess() = default;
  void close_channel();
  int pid_ = -1;
  int channel_ = -1;     // our end of the socket pair, or -1
  std::string pending_;  // bytes read past the last line
};

// Environment entries under which a child's heap memory starts as a fixed non-zero pattern
// (glibc's malloc perturbation, with every block from the heap rather than fresh zeroed pages).
// A child that computes from memory it never wrote then gets other values than a child without
// them, and than its own earlier runs: the second replays and `task check` use it to tell
// irreproducible arithmetic from a provider's cheat. Costs a fill of every block allocated.
std::vector<std::string> scrambled_memory_environment();

// A loopback TCP port that was free a moment ago (bound, read back, released).
Result<std::uint16_t> free_loopback_port();

// A TCP socket listening on 127.0.0.1 at a port the kernel picked, close-on-exec. A parent hands
// it to the child that serves (spawn's pass_fd), so clients connect at once, waiting in the
// backlog until the child accepts, rather than polling until it is up; and no other process can
// take the port in between, as it can after free_loopback_port.
struct LoopbackListener {
  Fd fd;
  std::uint16_t port = 0;
};
Result<LoopbackListener> listen_on_loopback();

}  // namespace vt
