#pragma once
// Internal to protocol/: one client connection, from accept to close (docs/protocol.md). The
// connection's life, hello and the cheap requests are in server_session.cpp; the requests that
// stream or prove a snapshot, and the hand-off of their catalog calls to the slow-work threads,
// in server_snapshot.cpp.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "protocol/net/server_impl.h"

namespace vt {

// An error reply. Format and authentication errors end the connection; errors about what a
// well-formed request asked for do not.
struct Reply {
  std::string code;
  std::string message;
  bool fatal = false;
};

// A catalog's failure as the client is told it: its invalid input is the request's (not_found),
// a committed state it cannot produce (kRejected) is "unusable_state", anything else the
// server's (internal).
Reply from_catalog(const Error& error, std::string_view what);
inline Reply bad_request(const Error& error) { return {"bad_request", error.message}; }

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl& server, net::tcp::socket socket)
      : server_(server),
        limits_(server.config.limits),
        executor_(socket.get_executor()),
        stream_(std::move(socket), nullptr),
        watchdog_(executor_) {}

  net::awaitable<void> run();

 private:
  // Admission (protocol/net/admission.h) gave this connection's slot to a newer one.
  void pushed_out();
  // Runs `call` on the slow-work threads and resumes on this session's strand with its result.
  template <typename T>
  net::awaitable<T> off_io(std::function<T()> call);
  net::awaitable<void> send(wire::MessageType type, const nlohmann::json& header,
                            ByteSpan payload = {});
  net::awaitable<void> send_error(const Reply& reply);
  // Writes one frame's buffers under the write deadline and counts them.
  net::awaitable<void> write(const std::vector<net::asio::const_buffer>& buffers,
                             std::size_t bytes);
  // Reads and checks the client's hello within `deadline`; a reply when it is refused.
  net::awaitable<std::optional<Reply>> greet(std::chrono::steady_clock::time_point deadline);
  net::awaitable<void> send_hello();
  net::awaitable<std::optional<Reply>> handle(const wire::Frame& request);
  net::awaitable<std::optional<Reply>> get_log(const wire::Frame& request);
  net::awaitable<std::optional<Reply>> subscribe(const wire::Frame& request);
  net::awaitable<std::optional<Reply>> get_snapshot(const wire::Frame& request);
  net::awaitable<std::optional<Reply>> get_chunks(const wire::Frame& request);
  net::awaitable<std::optional<Reply>> get_trace(const wire::Frame& request);

  Server::Impl& server_;
  const ServerLimits& limits_;
  net::asio::any_io_executor executor_;
  net::Stream stream_;  // plain until the peer's first bytes arrive, then TLS unless insecure
  net::Watchdog watchdog_;
  std::string address_;     // the peer's admission address
  std::uint64_t slot_ = 0;  // its admission id
  bool spoke_ = false;      // its first bytes arrived
};

}  // namespace vt
