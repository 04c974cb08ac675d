#include "protocol/net/transport.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include "common/file_io.h"
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

// What a failed SSL call means, in the error codes asio::ssl::stream used, so callers tell a
// closed peer (eof, stream_truncated) from a broken one the same way as before.
boost::system::error_code tls_error(int ssl_error) {
  if (ssl_error == SSL_ERROR_ZERO_RETURN) return asio::error::eof;
  if (ssl_error == SSL_ERROR_SYSCALL) {
    int e = errno;
    ERR_clear_error();
    if (e == 0) return ssl::error::stream_truncated;
    return {e, boost::system::system_category()};
  }
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) return ssl::error::stream_truncated;
  if (e == 0) return asio::error::connection_aborted;
  return {static_cast<int>(e), asio::error::get_ssl_category()};
}

// OpenSSL's own socket BIO write()s, which raises SIGPIPE in the whole process when the peer
// has gone; a client that disconnects must cost only its connection. This BIO is the socket
// BIO with send(MSG_NOSIGNAL) (and recv) on the descriptor kept as its data.
int bio_fd(BIO* bio) {
  return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(bio)));
}

int bio_retry_or_fail(BIO* bio, bool reading) {
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    if (reading) {
      BIO_set_retry_read(bio);
    } else {
      BIO_set_retry_write(bio);
    }
  }
  return -1;
}

int bio_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::send(bio_fd(bio), data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
  return n >= 0 ? static_cast<int>(n) : bio_retry_or_fail(bio, false);
}

int bio_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  ssize_t n = ::recv(bio_fd(bio), data, static_cast<std::size_t>(size), 0);
  return n >= 0 ? static_cast<int>(n) : bio_retry_or_fail(bio, true);
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* socket_bio_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "veritrain socket");
    if (m != nullptr) {
      BIO_meth_set_write(m, bio_write);
      BIO_meth_set_read(m, bio_read);
      BIO_meth_set_ctrl(m, bio_ctrl);
      BIO_meth_set_create(m, bio_create);
    }
    return m;
  }();
  return method;
}

// TLS records carry at most 16 KiB of data.
constexpr std::size_t kRecordData = 16384;

}  // namespace

void Stream::SslFree::operator()(SSL* ssl) const { SSL_free(ssl); }

Stream::Stream(tcp::socket socket, ssl::context* tls) : socket_(std::move(socket)) {
  if (tls != nullptr) use_tls(*tls);
}

void Stream::use_tls(ssl::context& tls) {
  ssl_.reset(SSL_new(tls.native_handle()));
  const BIO_METHOD* method = socket_bio_method();
  BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
  if (!ssl_ || bio == nullptr) {
    BIO_free(bio);
    throw boost::system::system_error(asio::error::no_memory, "TLS: " + openssl_error());
  }
  // The socket stays owned (and closed) by socket_; the BIO only borrows the descriptor.
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(socket_.native_handle())));
  SSL_set_bio(ssl_.get(), bio, bio);
  // OpenSSL reads as many records per recv() as fit in its buffer instead of one, which
  // quarters the system calls of a download; the buffer is released with the connection.
  SSL_set_read_ahead(ssl_.get(), 1);
  SSL_set_default_read_buffer_len(ssl_.get(), 4 * (kRecordData + 512));
  // OpenSSL does the socket I/O and reports "would block"; Asio only waits for readiness.
  socket_.non_blocking(true);
}

template <typename Op>
awaitable<void> Stream::tls_call(Op op) {
  for (;;) {
    // The watchdog closes the socket to end a stalled operation. Its descriptor number may
    // belong to another connection by then, so OpenSSL must not be handed it again.
    if (!socket_.is_open()) throw boost::system::system_error(asio::error::operation_aborted);
    ERR_clear_error();
    int ret = op();
    if (ret == 1) co_return;
    int err = SSL_get_error(ssl_.get(), ret);
    if (err == SSL_ERROR_WANT_READ) {
      co_await socket_.async_wait(tcp::socket::wait_read, use_awaitable);
    } else if (err == SSL_ERROR_WANT_WRITE) {
      co_await socket_.async_wait(tcp::socket::wait_write, use_awaitable);
    } else {
      throw boost::system::system_error(tls_error(err));
    }
  }
}

awaitable<void> Stream::handshake(ssl::stream_base::handshake_type type) {
  if (!ssl_) co_return;
  if (type == ssl::stream_base::client) {
    SSL_set_connect_state(ssl_.get());
  } else {
    SSL_set_accept_state(ssl_.get());
  }
  co_await tls_call([this] { return SSL_do_handshake(ssl_.get()); });
}

awaitable<void> Stream::read_exact(asio::mutable_buffer buffer) {
  if (!ssl_) {
    co_await asio::async_read(socket_, buffer, use_awaitable);
    co_return;
  }
  auto* at = static_cast<std::uint8_t*>(buffer.data());
  std::size_t left = buffer.size();
  while (left > 0) {
    // A retry after "would block" must repeat the same arguments: `at` and `left` only move
    // once a call succeeded.
    std::size_t n = 0;
    co_await tls_call([&] { return SSL_read_ex(ssl_.get(), at, left, &n); });
    at += n;
    left -= n;
  }
}

awaitable<void> Stream::tls_write(const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    std::size_t n = 0;
    co_await tls_call([&] { return SSL_write_ex(ssl_.get(), data, size, &n); });
    data += n;
    size -= n;
  }
}

awaitable<void> Stream::write_all(const std::vector<asio::const_buffer>& buffers) {
  if (!ssl_) {
    co_await asio::async_write(socket_, buffers, use_awaitable);
    co_return;
  }
  // SSL_write takes one buffer. A frame is a small head and a large payload; written apart, the
  // head would be a TLS record and a TCP segment of its own, so small buffers and the start of
  // what follows them are copied into one full record first.
  std::vector<std::uint8_t> stage;
  for (const auto& b : buffers) {
    const auto* data = static_cast<const std::uint8_t*>(b.data());
    std::size_t size = b.size();
    if (!stage.empty() || size < kRecordData) {
      std::size_t take = std::min(size, kRecordData - stage.size());
      stage.insert(stage.end(), data, data + take);
      data += take;
      size -= take;
      if (stage.size() < kRecordData) continue;
      co_await tls_write(stage.data(), stage.size());
      stage.clear();
    }
    if (size > 0) co_await tls_write(data, size);
  }
  if (!stage.empty()) co_await tls_write(stage.data(), stage.size());
}

void Stream::close() {
  boost::system::error_code ignored;
  socket_.close(ignored);
}

awaitable<void> Stream::close_gracefully(Millis linger) {
  boost::system::error_code ec;
  tcp::socket& s = socket_;
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
    std::size_t n =
        co_await s.async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
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
                                                const wire::FrameLimits& limits,
                                                Millis first_timeout, Millis rest_timeout,
                                                Bytes* payload_sink) {
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
    Bytes& into = payload_sink ? *payload_sink : frame.value->payload;
    std::size_t held = into.size();
    into.resize(held + prefix.value->payload_size);
    co_await stream.read_exact(asio::buffer(into.data() + held, prefix.value->payload_size));
  }
  if (watchdog) watchdog->disarm();
  co_return frame;
}

Result<std::shared_ptr<ssl::context>> server_tls_context(const std::filesystem::path& cert,
                                                         const std::filesystem::path& key) {
  VT_ASSIGN_OR_RETURN(auto ctx, tls13_context(ssl::context::tls_server));
  if (SSL_CTX_use_certificate_chain_file(ctx->native_handle(), cert.c_str()) != 1)
    return invalid_input("TLS certificate " + cert.string() + ": " + openssl_error());
  VT_RETURN_IF_ERROR(check_secret_file(key));
  if (SSL_CTX_use_PrivateKey_file(ctx->native_handle(), key.c_str(), SSL_FILETYPE_PEM) != 1)
    return invalid_input("TLS key " + key.string() + ": " + openssl_error());
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return invalid_input("TLS key " + key.string() + " does not match certificate " +
                         cert.string());
  // All three TLS 1.3 suites stay allowed; the server's order picks AES-128-GCM, which is the
  // fastest here with AES-NI (openssl speed: AES-128-GCM 4.3, AES-256-GCM 4.1, ChaCha20-Poly1305
  // 3.7 GB/s at 16 KiB), instead of the client's first choice, AES-256-GCM.
  if (SSL_CTX_set_ciphersuites(
          ctx->native_handle(),
          "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1)
    return internal_error("TLS: cannot set the TLS 1.3 cipher suites: " + openssl_error());
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_CIPHER_SERVER_PREFERENCE);
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
