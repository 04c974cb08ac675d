#pragma once
// Internal to protocol/: the server's shared state and one connection's session, split from
// server.cpp (listener and lifetime) so that each file stays readable.

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "protocol/net/admission.h"
#include "protocol/net/server.h"
#include "protocol/net/slow_work.h"
#include "protocol/net/transport.h"

namespace vt {

// Wakes one subscriber. The timer never expires by itself; notify cancels its wait.
struct CommitSignal {
  explicit CommitSignal(const net::asio::any_io_executor& executor) : timer(executor) {
    timer.expires_at(net::asio::steady_timer::time_point::max());
  }
  net::asio::steady_timer timer;
};

struct Server::Impl {
  ServerConfig config;
  std::shared_ptr<Catalog> catalog;
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  std::shared_ptr<net::ssl::context> tls;  // null when insecure
  std::vector<std::thread> threads;
  std::optional<Admission> admission;  // set in start()
  // Catalog calls that may read or code a whole snapshot; stopped after the I/O threads, whose
  // sessions wait on it.
  std::optional<SlowWork> slow;  // set in start()
  // Bumped before subscribers are woken, so one that was busy sending when the notification
  // came sees that it must look again instead of waiting.
  std::atomic<std::uint64_t> commit_generation{0};

  std::mutex mutex;
  std::set<std::shared_ptr<CommitSignal>> subscribers;  // GUARDED_BY(mutex)
  bool stopped = false;                                 // GUARDED_BY(mutex)

  // stop() resets both, the acceptor first: destroying the io_context destroys every suspended
  // session (closing its socket), and those still find the members above alive.
  std::optional<net::tcp::acceptor> acceptor;
  std::unique_ptr<net::asio::io_context> io = std::make_unique<net::asio::io_context>();
  std::optional<net::asio::steady_timer> accept_pause;  // on the acceptor's (implicit) strand

  void accept_next();
};

// Runs one connection to its end; never throws.
net::awaitable<void> run_session(Server::Impl& server, net::tcp::socket socket);

}  // namespace vt
