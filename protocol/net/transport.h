#pragma once
// Internal to protocol/: the byte stream (TLS 1.3 or, on loopback only, plain TCP) that both
// the server and the client speak frames over. Asio with SSL is heavy to compile, so only
// transport.cpp, server.cpp, server_session.cpp and connection.cpp include this header; the
// public headers (server.h, client.h, connection.h) hide it behind a pimpl.
//
// Asio operations here throw boost::system::system_error on I/O failure: exceptions stay inside
// protocol/ and are turned into vt::Error at the public API edge.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>  // Boost 1.74 awaitable.hpp uses std::exchange without including it
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "protocol/net/frame.h"

namespace vt::net {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;
using Millis = std::chrono::milliseconds;

// TLS runs OpenSSL directly on the non-blocking socket rather than through asio::ssl::stream:
// Asio's SSL layer moves every 16 KiB record through its own buffer and one event-loop round,
// which held TLS transfers to about a third of a plain TCP copy. Here one SSL_write or SSL_read
// loop moves a whole frame and only waits on the socket when the kernel says it would block.
class Stream {
 public:
  // `tls` null: plain TCP.
  Stream(tcp::socket socket, ssl::context* tls);

  // Makes a plain stream TLS, before its handshake: a server allocates no TLS state for a
  // connection until its peer has sent something.
  void use_tls(ssl::context& tls);

  tcp::socket& socket() { return socket_; }
  bool is_tls() const { return ssl_ != nullptr; }
  SSL* ssl_handle() { return ssl_.get(); }

  awaitable<void> handshake(ssl::stream_base::handshake_type type);
  awaitable<void> read_exact(asio::mutable_buffer buffer);
  awaitable<void> write_all(const std::vector<asio::const_buffer>& buffers);

  // Ends the connection now, aborting any pending operation on it.
  void close();
  // Sends FIN after the last frame and discards what the peer still sends for up to `linger`:
  // closing with unread input makes the kernel send RST, which can destroy the error frame
  // the peer has not read yet.
  awaitable<void> close_gracefully(Millis linger);

 private:
  struct SslFree {
    void operator()(SSL* ssl) const;
  };
  // Runs `op` (an SSL call returning its SSL_get_error-style result) until it succeeds, waiting
  // on the socket for whatever OpenSSL says it needs; throws on failure, EOF included.
  template <typename Op>
  awaitable<void> tls_call(Op op);
  awaitable<void> tls_write(const std::uint8_t* data, std::size_t size);

  tcp::socket socket_;
  std::unique_ptr<SSL, SslFree> ssl_;
};

// Closes a stream whose current operation outlives its deadline. Arm before each operation;
// run() is co_spawned beside the operations and ends after stop().
class Watchdog {
 public:
  explicit Watchdog(const asio::any_io_executor& executor) : timer_(executor) { disarm(); }
  void arm(Millis timeout) { timer_.expires_after(timeout); }
  void disarm() { timer_.expires_at(asio::steady_timer::time_point::max()); }
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }
  bool fired() const { return fired_; }
  awaitable<void> run(Stream& stream);

 private:
  asio::steady_timer timer_;
  bool stopped_ = false;
  bool fired_ = false;
};

// Reads one frame. The prefix may take `first_timeout` (the idle time between requests), the
// rest `rest_timeout`. Frames that break the format come back as a FrameError; I/O failures
// throw. With `payload_sink` the payload is appended there instead of to frame.payload, so a
// download lands where it is kept without another copy; on a throw the sink holds the bytes
// read so far (or zeroes), and the caller trims it.
awaitable<wire::Parsed<wire::Frame>> read_frame(Stream& stream, Watchdog* watchdog,
                                                const wire::FrameLimits& limits,
                                                Millis first_timeout, Millis rest_timeout,
                                                Bytes* payload_sink = nullptr);

// TLS 1.3 only, with the provider's certificate and key (PEM files).
Result<std::shared_ptr<ssl::context>> server_tls_context(const std::filesystem::path& cert,
                                                         const std::filesystem::path& key);
// TLS 1.3 only. With a CA file the chain and host name are verified by OpenSSL; without one the
// caller must compare the certificate fingerprint with its pin after the handshake.
Result<std::shared_ptr<ssl::context>> client_tls_context(const std::filesystem::path& ca_file);

// SHA-256 of the peer certificate's DER, lower-case hex; empty when there is none.
std::string peer_certificate_sha256(SSL* ssl);

bool is_loopback(const asio::ip::address& address);

// Equal tokens in time independent of where they differ (CRYPTO_memcmp over SHA-256 digests,
// so the length does not leak either).
bool token_equal(std::string_view a, std::string_view b);

}  // namespace vt::net
