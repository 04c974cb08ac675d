#include "protocol/net/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "protocol/net/server_impl.h"

namespace vt {

namespace asio = net::asio;
using net::tcp;

namespace {

// The local address of an inherited descriptor that must be a listening TCP socket.
Result<tcp::endpoint> listening_endpoint(int fd) {
  const std::string what = "server: descriptor " + std::to_string(fd);
  if (::fcntl(fd, F_GETFD) < 0)
    return invalid_input(what + " is not open (nothing was passed to this process as it)");
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    return invalid_input(what + " is not a socket");
  len = sizeof listening;
  if (type != SOCK_STREAM || ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) {
    return invalid_input(what + " is not a TCP socket");
  }
  if (listening == 0)
    return invalid_input(what + " is not listening (bind(2) and listen(2) it before passing it)");
  sockaddr_storage addr{};
  len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)) {
    return invalid_input(what + " is not an IPv4 or IPv6 socket");
  }
  tcp::endpoint endpoint;
  if (len > endpoint.capacity())
    return invalid_input(what + ": its address does not fit an IP endpoint");
  std::memcpy(endpoint.data(), &addr, len);
  endpoint.resize(len);
  return endpoint;
}

// Descriptors the process needs beside the connections: the listener, the metrics listener,
// the catalog's files, OpenSSL's and the standard streams.
constexpr std::size_t kReservedDescriptors = 64;

// The silent pool that fits the descriptor limit beside the other pools, after raising the soft
// limit toward the hard one if it is short.
std::size_t silent_that_fits(const ServerLimits& limits) {
  const std::size_t others =
      limits.max_connections + limits.max_unauthenticated + kReservedDescriptors;
  const rlim_t wanted = static_cast<rlim_t>(others + limits.max_silent);
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0) return limits.max_silent;
  if (now.rlim_cur != RLIM_INFINITY && now.rlim_cur < wanted) {
    rlimit raised = now;
    raised.rlim_cur = now.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, now.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) now = raised;
  }
  if (now.rlim_cur == RLIM_INFINITY || now.rlim_cur >= wanted) return limits.max_silent;
  // Too few even so: the silent pool gives way (a few slots stay, or nobody could connect).
  const auto cur = static_cast<std::size_t>(now.rlim_cur);
  return std::max<std::size_t>(8, cur > others ? cur - others : 0);
}

}  // namespace

void Server::Impl::accept_next() {
  // Each connection gets its own strand: its session and watchdog never run at the same time,
  // while different connections run on different threads.
  acceptor->async_accept(
      asio::make_strand(*io), [this](boost::system::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
        if (!ec) {
          boost::system::error_code ignored;
          socket.set_option(tcp::no_delay(true), ignored);
          socket.set_option(asio::socket_base::keep_alive(true), ignored);
          auto executor = socket.get_executor();
          asio::co_spawn(executor, run_session(*this, std::move(socket)), asio::detached);
        }
        // Running out of descriptors must not end the accept loop, but retrying at once would spin
        // a core for as long as the descriptors stay taken (the pending connection stays in the
        // backlog, so every accept fails again immediately): pause, then try again.
        if (ec == asio::error::no_descriptors ||
            ec == boost::system::errc::too_many_files_open_in_system ||
            ec == asio::error::no_buffer_space || ec == asio::error::no_memory) {
          metrics->count_accept_pause();
          accept_pause->expires_after(config.limits.accept_backoff);
          accept_pause->async_wait([this](boost::system::error_code wait_ec) {
            if (wait_ec != asio::error::operation_aborted && acceptor->is_open()) accept_next();
          });
          return;
        }
        accept_next();
      });
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(ServerConfig config,
                                              std::shared_ptr<Catalog> catalog) {
  if (!catalog) return internal_error("server: no catalog to serve");
  if (config.token.empty())
    return invalid_input("server: a bearer token is required (clients must present it in hello)");
  if (config.threads == 0) config.threads = 1;
  if (config.limits.snapshot_chunk == 0 || config.limits.snapshot_chunk > (16u << 20))
    return invalid_input("server: snapshot_chunk must be in 1..16777216 bytes, got " +
                         std::to_string(config.limits.snapshot_chunk));
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  if (config.listen_fd >= 0) {
    VT_ASSIGN_OR_RETURN(endpoint, listening_endpoint(config.listen_fd));
    config.host = endpoint.address().to_string();
  } else {
    auto address = asio::ip::make_address(config.host, ec);
    if (ec)
      return invalid_input("server: listen address \"" + config.host + "\" is not an IP address");
    endpoint = tcp::endpoint(address, config.port);
  }
  const auto address = endpoint.address();
  auto impl = std::make_unique<Impl>();
  if (config.insecure) {
    if (!net::is_loopback(address))
      return invalid_input(
          "server: --insecure (plain TCP) is only allowed on a loopback address, not " +
          config.host);
  } else {
    if (config.tls_cert.empty() || config.tls_key.empty())
      return invalid_input(
          "server: TLS needs a certificate and a key file (or --insecure on loopback)");
    VT_ASSIGN_OR_RETURN(impl->tls, net::server_tls_context(config.tls_cert, config.tls_key));
  }
  // The gauge starts at what is already durable; notify_commit moves it on.
  auto records = catalog->log_records(0);
  if (!records.ok()) return records.error().context("server: reading the catalog's log");
  impl->metrics->set_epochs_committed(records->size());

  config.limits.max_silent = silent_that_fits(config.limits);
  AdmissionLimits admission;
  admission.authenticated = config.limits.max_connections;
  admission.authenticated_per_address = config.limits.max_connections_per_address;
  admission.handshaking = config.limits.max_unauthenticated;
  admission.handshaking_per_address = config.limits.max_unauthenticated_per_address;
  admission.silent = config.limits.max_silent;
  admission.grace = config.limits.unauthenticated_grace;
  impl->admission.emplace(admission);
  impl->slow.emplace(config.slow_threads);
  impl->accept_pause.emplace(*impl->io);
  auto& acceptor = impl->acceptor.emplace(*impl->io);
  if (config.listen_fd >= 0) {
    ::fcntl(config.listen_fd, F_SETFD, FD_CLOEXEC);  // no child of ours inherits it in turn
    acceptor.assign(endpoint.protocol(), config.listen_fd, ec);
    if (ec)
      return io_error("server: serving on descriptor " + std::to_string(config.listen_fd) + ": " +
                      ec.message());
  } else {
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return io_error("server: listening on " + config.host + ":" + std::to_string(config.port) +
                      ": " + ec.message());
  }

  impl->config = std::move(config);
  impl->catalog = std::move(catalog);
  impl->accept_next();
  for (std::size_t i = 0; i < impl->config.threads; ++i) {
    Impl* raw = impl.get();
    impl->threads.emplace_back([raw] {
      // A handler that throws (out of memory, a bug) must cost one connection, not the whole
      // provider: an exception leaving a thread's entry function would terminate the process.
      for (;;) {
        try {
          raw->io->run();
          return;
        } catch (const std::exception&) {
          raw->metrics->count_error("internal");
        }
      }
    });
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Endpoint Server::endpoint() const {
  boost::system::error_code ec;
  std::lock_guard lock(impl_->mutex);
  auto local =
      impl_->acceptor && !impl_->stopped ? impl_->acceptor->local_endpoint(ec) : tcp::endpoint();
  return Endpoint{impl_->config.host, local.port()};
}

void Server::notify_commit(std::uint64_t epoch) {
  impl_->metrics->set_epochs_committed(epoch + 1);
  impl_->commit_generation.fetch_add(1);
  std::lock_guard lock(impl_->mutex);
  if (impl_->stopped) return;
  for (const auto& signal : impl_->subscribers) {
    // A timer is not thread-safe: cancel it on its session's strand.
    asio::post(signal->timer.get_executor(), [signal] { signal->timer.cancel(); });
  }
}

void Server::stop() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  // Stopping the io_context abandons every session where it is suspended; their frames (and
  // sockets) are destroyed with the io_context, which closes the connections.
  impl_->io->stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  // Sessions waiting on slow work are destroyed with their queued jobs; a job still running
  // posts its result to the stopped io_context, which discards it below.
  impl_->slow->stop();
  // The sessions the io_context abandoned never left their admission slots, whose callbacks
  // hold their strands: they go now, while the io_context that owns the strands still lives.
  impl_->admission->clear();
  impl_->acceptor.reset();
  impl_->accept_pause.reset();
  impl_->io.reset();
}

std::shared_ptr<const Metrics> Server::metrics() const { return impl_->metrics; }

}  // namespace vt
