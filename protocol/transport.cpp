#include "protocol/transport.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/sha256.h"

namespace vt::net {
namespace {

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

Result<std::shared_ptr<ssl::context>> tls13_context(ssl::context::method method) {
  auto ctx = std::make_shared<ssl::context>(method);
  if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_3_VERSION) != 1)
    return internal_error("TLS: cannot require TLS 1.3: " + openssl_error());
  return ctx;
}

}  // namespace

Stream::Stream(tcp::socket socket, ssl::context* tls) {
  if (tls != nullptr) {
    tls_.emplace(std::move(socket), *tls);
  } else {
    plain_.emplace(std::move(socket));
  }
}

awaitable<void> Stream::handshake(ssl::stream_base::handshake_type type) {
  if (tls_) co_await tls_->async_handshake(type, use_awaitable);
}

awaitable<void> Stream::read_exact(asio::mutable_buffer buffer) {
  if (tls_) {
    co_await asio::async_read(*tls_, buffer, use_awaitable);
  } else {
    co_await asio::async_read(*plain_, buffer, use_awaitable);
  }
}

awaitable<void> Stream::write_all(const std::vector<asio::const_buffer>& buffers) {
  if (tls_) {
    co_await asio::async_write(*tls_, buffers, use_awaitable);
  } else {
    co_await asio::async_write(*plain_, buffers, use_awaitable);
  }
}

void Stream::close() {
  boost::system::error_code ignored;
  socket().close(ignored);
}

awaitable<void> Stream::close_gracefully(Millis linger) {
  boost::system::error_code ec;
  tcp::socket& s = socket();
  if (!s.is_open()) co_return;
  s.shutdown(tcp::socket::shutdown_send, ec);
  asio::steady_timer timer(s.get_executor());
  timer.expires_after(linger);
  timer.async_wait([&s](const boost::system::error_code& e) {
    boost::system::error_code ignored;
    if (!e) s.close(ignored);
  });
  std::array<std::uint8_t, 16384> sink;
  std::uint64_t drained = 0;
  while (!ec && drained < (std::uint64_t{1} << 20)) {
    std::size_t n = co_await s.async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
    drained += n;
  }
  timer.cancel();
  s.close(ec);
}

awaitable<void> Watchdog::run(Stream& stream) {
  while (!stopped_) {
    if (timer_.expiry() <= asio::steady_timer::clock_type::now()) {
      fired_ = true;
      stream.close();
      co_return;
    }
    boost::system::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(use_awaitable, ec));
  }
}

awaitable<wire::Parsed<wire::Frame>> read_frame(Stream& stream, Watchdog* watchdog,
                                                const wire::FrameLimits& limits, Millis first_timeout,
                                                Millis rest_timeout) {
  std::array<std::uint8_t, wire::kPrefixSize> prefix_bytes;
  if (watchdog) watchdog->arm(first_timeout);
  co_await stream.read_exact(asio::buffer(prefix_bytes));
  auto prefix = wire::parse_prefix(prefix_bytes, limits);
  if (!prefix.ok()) co_return wire::Parsed<wire::Frame>{std::nullopt, prefix.error};
  Bytes header(prefix.value->header_size);
  if (watchdog) watchdog->arm(rest_timeout);
  co_await stream.read_exact(asio::buffer(header));
  auto frame = wire::parse_header(*prefix.value, header);
  if (frame.ok() && prefix.value->payload_size > 0) {
    frame.value->payload.resize(prefix.value->payload_size);
    co_await stream.read_exact(asio::buffer(frame.value->payload));
  }
  if (watchdog) watchdog->disarm();
  co_return frame;
}

Result<std::shared_ptr<ssl::context>> server_tls_context(const std::filesystem::path& cert,
                                                         const std::filesystem::path& key) {
  VT_ASSIGN_OR_RETURN(auto ctx, tls13_context(ssl::context::tls_server));
  if (SSL_CTX_use_certificate_chain_file(ctx->native_handle(), cert.c_str()) != 1)
    return invalid_input("TLS certificate " + cert.string() + ": " + openssl_error());
  if (SSL_CTX_use_PrivateKey_file(ctx->native_handle(), key.c_str(), SSL_FILETYPE_PEM) != 1)
    return invalid_input("TLS key " + key.string() + ": " + openssl_error());
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return invalid_input("TLS key " + key.string() + " does not match certificate " + cert.string());
  return ctx;
}

Result<std::shared_ptr<ssl::context>> client_tls_context(const std::filesystem::path& ca_file) {
  VT_ASSIGN_OR_RETURN(auto ctx, tls13_context(ssl::context::tls_client));
  if (ca_file.empty()) {
    // Pinning: the self-signed certificate fails chain verification by design; the pin is
    // compared after the handshake, before any request is sent.
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    if (SSL_CTX_load_verify_locations(ctx->native_handle(), ca_file.c_str(), nullptr) != 1)
      return invalid_input("CA file " + ca_file.string() + ": " + openssl_error());
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

std::string peer_certificate_sha256(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return {};
  unsigned char* der = nullptr;
  int len = i2d_X509(cert, &der);
  std::string out;
  if (len > 0) out = hex_encode(sha256(ByteSpan(der, static_cast<std::size_t>(len))));
  OPENSSL_free(der);
  X509_free(cert);
  return out;
}

bool is_loopback(const asio::ip::address& address) {
  if (address.is_loopback()) return true;
  // ::ffff:127.x.y.z is loopback too, but asio's is_loopback() on a v6 address only knows ::1.
  return address.is_v6() && address.to_v6().is_v4_mapped() &&
         asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).is_loopback();
}

bool token_equal(std::string_view a, std::string_view b) {
  Digest da = sha256(a), db = sha256(b);
  return CRYPTO_memcmp(da.data(), db.data(), da.size()) == 0;
}

}  // namespace vt::net
