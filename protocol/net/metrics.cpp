#include "protocol/net/metrics.h"

#include <sstream>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace vt {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::size_t error_index(std::string_view code) {
  for (std::size_t i = 0; i + 1 < std::size(Metrics::kErrorCodes); ++i)
    if (Metrics::kErrorCodes[i] == code) return i;
  return std::size(Metrics::kErrorCodes) - 1;
}

}  // namespace

void Metrics::count_request(wire::MessageType type) {
  auto i = static_cast<std::size_t>(type);
  if (i <= wire::kMaxMessageType) requests_[i].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::count_error(std::string_view code) {
  errors_[error_index(code)].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::set_epochs_committed(std::uint64_t n) {
  // Notifications may arrive out of order from several threads; the count only grows.
  std::uint64_t cur = epochs_.load(std::memory_order_relaxed);
  while (cur < n && !epochs_.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}

std::uint64_t Metrics::requests(wire::MessageType type) const {
  auto i = static_cast<std::size_t>(type);
  return i <= wire::kMaxMessageType ? requests_[i].load(std::memory_order_relaxed) : 0;
}

std::uint64_t Metrics::errors(std::string_view code) const {
  return errors_[error_index(code)].load(std::memory_order_relaxed);
}

std::uint64_t Metrics::errors_total() const {
  std::uint64_t n = 0;
  for (const auto& e : errors_) n += e.load(std::memory_order_relaxed);
  return n;
}

std::string Metrics::prometheus_text() const {
  std::ostringstream out;
  out << "# HELP veritrain_requests_total Requests received, by message type.\n"
         "# TYPE veritrain_requests_total counter\n";
  for (std::uint8_t t = 1; t <= wire::kMaxMessageType; ++t) {
    auto type = static_cast<wire::MessageType>(t);
    out << "veritrain_requests_total{type=\"" << wire::message_name(type) << "\"} "
        << requests(type) << "\n";
  }
  out << "# HELP veritrain_errors_total Error replies sent, by code.\n"
         "# TYPE veritrain_errors_total counter\n";
  for (std::size_t i = 0; i < std::size(kErrorCodes); ++i)
    out << "veritrain_errors_total{code=\"" << kErrorCodes[i] << "\"} "
        << errors_[i].load(std::memory_order_relaxed) << "\n";
  out << "# HELP veritrain_bytes_sent_total Frame bytes written to clients (before TLS).\n"
         "# TYPE veritrain_bytes_sent_total counter\n"
      << "veritrain_bytes_sent_total " << bytes_sent() << "\n"
      << "# HELP veritrain_active_connections Open client connections.\n"
         "# TYPE veritrain_active_connections gauge\n"
      << "veritrain_active_connections " << active_connections() << "\n"
      << "# HELP veritrain_connections_total Client connections accepted.\n"
         "# TYPE veritrain_connections_total counter\n"
      << "veritrain_connections_total " << connections_total() << "\n"
      << "# HELP veritrain_snapshot_resumes_total Snapshot downloads resumed at an offset.\n"
         "# TYPE veritrain_snapshot_resumes_total counter\n"
      << "veritrain_snapshot_resumes_total " << resumes() << "\n"
      << "# HELP veritrain_accept_pauses_total Times the listener paused, out of file "
         "descriptors.\n"
         "# TYPE veritrain_accept_pauses_total counter\n"
      << "veritrain_accept_pauses_total " << accept_pauses() << "\n"
      << "# HELP veritrain_epochs_committed Epochs with a durable commitment.\n"
         "# TYPE veritrain_epochs_committed gauge\n"
      << "veritrain_epochs_committed " << epochs_committed() << "\n";
  return out.str();
}

// One request per connection, served asynchronously on the listener's one thread: a scrape is
// tiny and rare, so that thread is enough, and being its own it never blocks the protocol server.
struct MetricsServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<std::string()> render;
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) serve(std::move(socket));
      accept();
    });
  }

  void serve(tcp::socket socket) {
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    auto buffer = std::make_shared<beast::flat_buffer>(8192);
    auto request = std::make_shared<http::request<http::empty_body>>();
    stream->expires_after(std::chrono::seconds(5));
    http::async_read(*stream, *buffer, *request,
                     [this, stream, buffer, request](beast::error_code ec, std::size_t) {
                       if (ec) return;
                       auto response = std::make_shared<http::response<http::string_body>>();
                       response->version(request->version());
                       response->keep_alive(false);
                       const bool get = request->method() == http::verb::get;
                       if (get && request->target() == "/metrics") {
                         response->result(http::status::ok);
                         response->set(http::field::content_type, "text/plain; version=0.0.4");
                         response->body() = render();
                       } else if (get && request->target() == "/healthz") {
                         response->result(http::status::ok);
                         response->set(http::field::content_type, "text/plain");
                         response->body() = "ok\n";
                       } else {
                         response->result(http::status::not_found);
                         response->set(http::field::content_type, "text/plain");
                         response->body() = "not found: GET /metrics or /healthz\n";
                       }
                       response->prepare_payload();
                       http::async_write(
                           *stream, *response, [stream, response](beast::error_code, std::size_t) {
                             beast::error_code ignored;
                             stream->socket().shutdown(tcp::socket::shutdown_send, ignored);
                           });
                     });
  }
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() { stop(); }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(
    const std::string& host, std::uint16_t port, std::shared_ptr<const Metrics> metrics) {
  return start(host, port, [metrics] { return metrics->prometheus_text(); });
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& host,
                                                            std::uint16_t port,
                                                            std::function<std::string()> render) {
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return invalid_input("metrics listen address \"" + host + "\": " + ec.message());
  tcp::endpoint endpoint(address, port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return io_error("metrics listener on " + host + ":" + std::to_string(port) + ": " +
                    ec.message());
  impl->accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

std::uint16_t MetricsServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void MetricsServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
}

}  // namespace vt
