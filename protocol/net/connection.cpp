#include "protocol/net/connection.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>

#include "protocol/net/transport.h"

namespace vt {

namespace asio = net::asio;
using net::tcp;

struct Connection::Impl {
  ClientConfig config;
  asio::io_context io;
  std::shared_ptr<net::ssl::context> tls;
  std::optional<net::Stream> stream;
  std::string fingerprint;

  std::string where() const { return config.host + ":" + std::to_string(config.port); }

  // Runs one operation to completion or its deadline. On the deadline the socket is closed,
  // which makes the operation finish with an error that is reported as a timeout.
  template <typename T>
  Result<T> run(net::awaitable<T> op, net::Millis timeout, const std::string& what,
                bool* timed_out_out = nullptr) {
    // The exchange's deadline shortens every wait; a wait it cuts is reported as the deadline.
    bool by_deadline = false;
    if (config.deadline != std::chrono::steady_clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<net::Millis>(config.deadline -
                                                                std::chrono::steady_clock::now());
      if (left <= timeout) {
        by_deadline = true;
        timeout = std::max(left, net::Millis(0));
      }
    }
    std::optional<T> value;
    std::exception_ptr failure;
    bool done = false;
    asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T v) {
      done = true;
      failure = e;
      if (!e) value.emplace(std::move(v));
    });
    io.restart();
    io.run_for(timeout);
    bool timed_out = !done;
    if (timed_out_out) *timed_out_out = timed_out;
    if (timed_out) {
      if (stream) stream->close();
      io.restart();
      io.run();
    }
    if (timed_out && by_deadline)
      return rejected(what + " " + where() +
                      ": the provider had not answered when the verifier's deadline passed");
    if (timed_out)
      return io_error(what + " " + where() + ": no progress within " +
                      std::to_string(timeout.count()) + " ms");
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const boost::system::system_error& e) {
        if (e.code() == asio::error::eof || e.code() == net::ssl::error::stream_truncated)
          return io_error(what + " " + where() + ": the server closed the connection");
        return io_error(what + " " + where() + ": " + e.code().message());
      } catch (const std::exception& e) {
        return io_error(what + " " + where() + ": " + e.what());
      }
    }
    return std::move(*value);
  }
};

namespace {

net::awaitable<bool> connect_and_handshake(Connection::Impl& c) {
  tcp::resolver resolver(c.io);
  auto endpoints = co_await resolver.async_resolve(c.config.host, std::to_string(c.config.port),
                                                   net::use_awaitable);
  if (c.config.insecure) {
    for (const auto& e : endpoints)
      if (!net::is_loopback(e.endpoint().address())) co_return false;
  }
  tcp::socket socket(c.io);
  co_await asio::async_connect(socket, endpoints, net::use_awaitable);
  socket.set_option(tcp::no_delay(true));
  c.stream.emplace(std::move(socket), c.tls.get());
  if (c.tls && !c.config.ca_file.empty()) {
    SSL* ssl = c.stream->ssl_handle();
    boost::system::error_code ec;
    asio::ip::make_address(c.config.host, ec);
    if (ec) {
      SSL_set_tlsext_host_name(ssl, c.config.host.c_str());
      SSL_set1_host(ssl, c.config.host.c_str());
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), c.config.host.c_str());
    }
  }
  co_await c.stream->handshake(net::ssl::stream_base::client);
  co_return true;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() { close(); }

Result<Connection> Connection::open(const ClientConfig& config) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (!config.insecure) {
    if (config.pin_sha256.empty() && config.ca_file.empty())
      return invalid_input("connecting to " + impl->where() +
                           ": TLS needs the server's certificate fingerprint to pin or a CA file");
    VT_ASSIGN_OR_RETURN(impl->tls, net::client_tls_context(config.ca_file));
  }
  VT_ASSIGN_OR_RETURN(bool loopback, impl->run(connect_and_handshake(*impl), config.connect_timeout,
                                               "connecting to"));
  if (!loopback)
    return invalid_input("connecting to " + impl->where() +
                         ": plain TCP (insecure) is only allowed to a loopback address");
  if (impl->tls) {
    impl->fingerprint = net::peer_certificate_sha256(impl->stream->ssl_handle());
    if (!config.pin_sha256.empty() && impl->fingerprint != lower(config.pin_sha256)) {
      impl->stream->close();
      return io_error("connecting to " + impl->where() + ": the server certificate's SHA-256 is " +
                      impl->fingerprint + ", not the pinned " + config.pin_sha256 +
                      " - refusing to talk to it");
    }
  }
  return Connection(std::move(impl));
}

Status Connection::write(ByteSpan bytes) {
  if (!is_open()) return io_error("writing to " + where() + ": the connection is closed");
  auto op = [](net::Stream& s, ByteSpan b) -> net::awaitable<bool> {
    std::vector<asio::const_buffer> buffers{asio::buffer(b.data(), b.size())};
    co_await s.write_all(buffers);
    co_return true;
  };
  auto r = impl_->run(op(*impl_->stream, bytes), impl_->config.io_timeout, "writing to");
  if (!r.ok()) return r.error();
  return {};
}

Status Connection::send(wire::MessageType type, const nlohmann::json& header, ByteSpan payload) {
  Bytes frame = wire::encode_frame(type, header, payload);
  return write(frame);
}

Result<wire::Frame> Connection::read_frame() {
  return read_frame(impl_ ? impl_->config.io_timeout : net::Millis(0));
}

Result<wire::Frame> Connection::read_frame(std::chrono::milliseconds timeout) {
  return read_frame_to(nullptr, timeout);
}

Result<wire::Frame> Connection::read_frame_into(Bytes& sink, std::chrono::milliseconds timeout) {
  return read_frame_to(&sink, timeout);
}

Result<wire::Frame> Connection::read_frame_to(Bytes* sink, std::chrono::milliseconds timeout) {
  if (!is_open()) return io_error("reading from " + where() + ": the connection is closed");
  auto parsed = impl_->run(
      net::read_frame(*impl_->stream, nullptr, impl_->config.limits, timeout, timeout, sink),
      timeout, "reading from");
  if (!parsed.ok()) return parsed.error();
  // A frame that breaks the format is the peer's fault, never the caller's input.
  if (!parsed->ok()) return rejected("reading from " + where() + ": " + parsed->error.message);
  return std::move(*parsed->value);
}

bool Connection::wait_closed(std::chrono::milliseconds timeout) {
  if (!is_open()) return true;
  auto op = [](net::Stream& s) -> net::awaitable<bool> {
    std::array<std::uint8_t, 4096> sink;
    for (;;) co_await s.read_exact(asio::buffer(sink, 1));
  };
  bool timed_out = false;
  auto r = impl_->run(op(*impl_->stream), timeout, "waiting on", &timed_out);
  // Only the deadline ends reads that keep succeeding; any read error means the peer closed.
  return !r.ok() && !timed_out;
}

void Connection::close() {
  if (impl_ && impl_->stream) {
    impl_->stream->close();
    impl_->stream.reset();
  }
}

bool Connection::is_open() const {
  return impl_ && impl_->stream && impl_->stream->socket().is_open();
}

std::string Connection::where() const { return impl_ ? impl_->where() : std::string("(closed)"); }

}  // namespace vt
