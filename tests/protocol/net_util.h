#pragma once
// Small POSIX socket helpers for the server tests: an HTTP GET for /metrics and a TCP relay that
// cuts its first connection after a given number of bytes (to test resumed downloads).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/process.h"

namespace vt::testing {

inline int connect_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// The whole response (headers and body) to one GET, or "" on failure.
inline std::string http_get(std::uint16_t port, const std::string& path) {
  int fd = connect_loopback(port);
  if (fd < 0) return {};
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return {};
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// Relays 127.0.0.1:port() to 127.0.0.1:target. On the first connection, once `at` bytes went
// from the target to the client, it either cuts the connection (both ways) or flips one bit of
// the next byte and relays on, as a bad link would; later connections relay untouched.
class CuttingProxy {
 public:
  enum class Fault { kCut, kFlipBit };

  CuttingProxy(std::uint16_t target, std::uint64_t at, Fault fault = Fault::kCut)
      : target_(target), cut_after_(at), fault_(fault) {
    auto listener = listen_on_loopback();  // on failure port_ stays 0 and every connect fails
    if (listener.ok()) {
      listen_fd_ = listener->fd.release();
      port_ = listener->port;
    }
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~CuttingProxy() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    for (auto& t : relays_) t.join();
  }
  std::uint16_t port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      int upstream = connect_loopback(target_);
      bool cut = connections_++ == 0;
      relays_.emplace_back([this, client, upstream, cut] { relay(client, upstream, cut); });
    }
  }

  void relay(int client, int upstream, bool faulty) {
    std::uint64_t down = 0;
    bool flipped = false;
    const bool cut = faulty && fault_ == Fault::kCut;
    std::vector<char> buf(64 << 10);
    pollfd fds[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
    while (!stop_ && upstream >= 0) {
      if (::poll(fds, 2, 100) <= 0) continue;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int from = fds[i].fd, to = fds[1 - i].fd;
        std::size_t want = buf.size();
        if (cut && from == upstream) want = std::min<std::uint64_t>(want, cut_after_ - down);
        ssize_t n = ::recv(from, buf.data(), want, 0);
        if (n > 0 && faulty && !cut && !flipped && from == upstream && down + n > cut_after_) {
          buf[cut_after_ - down] ^= 0x10;
          flipped = true;
        }
        if (n <= 0 || ::send(to, buf.data(), static_cast<std::size_t>(n), MSG_NOSIGNAL) != n)
          done = true;
        if (n > 0 && from == upstream) down += static_cast<std::uint64_t>(n);
        if (cut && down >= cut_after_) done = true;
      }
      if (done) break;
    }
    ::shutdown(client, SHUT_RDWR);
    ::close(client);
    if (upstream >= 0) ::close(upstream);
  }

  std::uint16_t target_;
  std::uint64_t cut_after_;
  Fault fault_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::vector<std::thread> relays_;  // only touched by the acceptor thread and the destructor
};

}  // namespace vt::testing
