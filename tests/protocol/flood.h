#pragma once
// A connection flood for the server tests and bench_flood: `count` TCP connections that never
// send a byte, each replaced as soon as the server drops it, from a chosen loopback address.
// It runs on its own thread, opens at most `max_connections` in all and stops by itself after
// `duration`, so a test that forgets it cannot leave it running.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace vt::testing {

struct SilentFloodOptions {
  std::uint16_t port = 0;
  std::size_t count = 70;                      // connections held open at once
  std::string source = "127.0.0.1";            // the address they come from
  std::chrono::milliseconds duration{30'000};  // stops by itself after this
  std::uint64_t max_connections = 1'000'000;   // and after opening this many
};

class SilentFlood {
 public:
  explicit SilentFlood(SilentFloodOptions options) : options_(std::move(options)) {
    thread_ = std::thread([this] { run(); });
  }
  ~SilentFlood() { stop(); }
  SilentFlood(const SilentFlood&) = delete;
  SilentFlood& operator=(const SilentFlood&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Connections opened so far (the first `count` and every replacement).
  std::uint64_t opened() const { return opened_; }
  // Connections the server closed (each was replaced).
  std::uint64_t dropped() const { return dropped_; }
  // Connections open now.
  std::size_t open_now() const { return open_now_; }

 private:
  // A non-blocking connect from options_.source: the flood must not stall on a full backlog.
  int open_one() const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, options_.source.c_str(), &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(options_.port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 &&
         errno != EINPROGRESS)) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  void run() {
    const auto end = std::chrono::steady_clock::now() + options_.duration;
    std::vector<pollfd> fds(options_.count, pollfd{-1, 0, 0});
    char sink[256];
    while (!stop_ && std::chrono::steady_clock::now() < end) {
      std::size_t open = 0;
      for (auto& p : fds) {
        if (p.fd < 0 && opened_ < options_.max_connections) {
          p.fd = open_one();
          if (p.fd >= 0) ++opened_;
        }
        p.events = POLLIN | POLLRDHUP;
        open += p.fd >= 0 ? 1 : 0;
      }
      open_now_ = open;
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (auto& p : fds) {
        if (p.fd < 0 || p.revents == 0) continue;
        // The server never speaks first, so anything readable is its close (EOF or a reset).
        if (::recv(p.fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) continue;
        ::close(p.fd);
        p.fd = -1;
        ++dropped_;
      }
    }
    for (auto& p : fds)
      if (p.fd >= 0) ::close(p.fd);
    open_now_ = 0;
  }

  SilentFloodOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> opened_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::size_t> open_now_{0};
  std::thread thread_;
};

}  // namespace vt::testing
