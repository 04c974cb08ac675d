// One client connection: silent until its first bytes, then the TLS handshake and hello with
// the bearer token, then requests one at a time until the client leaves, a timeout fires or a
// frame breaks the format (docs/protocol.md).

#include "protocol/net/server_session.h"

#include <boost/asio/post.hpp>

namespace vt {

namespace asio = net::asio;
using nlohmann::json;
using wire::Frame;
using wire::MessageType;

namespace {

constexpr net::Millis kLinger{1000};
constexpr std::size_t kLogBatchBytes = 4u << 20;

}  // namespace

Reply from_catalog(const Error& error, std::string_view what) {
  std::string message = std::string(what) + ": " + error.message;
  if (error.code == Errc::kRejected) return {"unusable_state", message};
  if (error.code == Errc::kInvalidInput) return {"not_found", message};
  return {"internal", message};
}

void Session::pushed_out() {
  if (server_.admission->admitted(slot_)) return;  // it spoke meanwhile and moved on
  // Pushed out while silent, but its first bytes may be in the socket already, unseen only
  // because this strand had not run yet: such a connection is speaking and moves on.
  boost::system::error_code ec;
  if (!spoke_ && stream_.socket().available(ec) > 0 && !ec && server_.admission->speak(slot_))
    return;
  stream_.close();
}

net::awaitable<void> Session::send(MessageType type, const json& header, ByteSpan payload) {
  Bytes head = wire::encode_head(type, header, static_cast<std::uint32_t>(payload.size()));
  // Buffers are built outside co_await: GCC 12 miscompiles braced lists in a co_await
  // expression ("array used as initializer"), so every header below is a local too.
  std::vector<asio::const_buffer> buffers{asio::buffer(head),
                                          asio::buffer(payload.data(), payload.size())};
  co_await write(buffers, head.size() + payload.size());
}

net::awaitable<void> Session::write(const std::vector<asio::const_buffer>& buffers,
                                    std::size_t bytes) {
  watchdog_.arm(limits_.write_timeout);
  co_await stream_.write_all(buffers);
  watchdog_.disarm();
  server_.metrics->add_bytes_sent(bytes);
  // The TLS stream only yields when the socket is full, so a fast reader could keep this thread
  // for a whole snapshot; one turn per frame lets the other connections on it move too.
  co_await asio::post(executor_, net::use_awaitable);
}

net::awaitable<void> Session::send_error(const Reply& reply) {
  server_.metrics->count_error(reply.code);
  const Bytes frame = wire::encode_error(reply.code, reply.message);
  std::vector<asio::const_buffer> buffers{asio::buffer(frame)};
  co_await write(buffers, frame.size());
}

net::awaitable<void> Session::run() {
  auto self = shared_from_this();
  server_.metrics->connection_opened();
  boost::system::error_code ec;
  address_ = admission_address(stream_.socket().remote_endpoint(ec).address().to_string());
  auto pushed_out = [weak = weak_from_this(), executor = executor_] {
    asio::post(executor, [weak] {
      if (auto session = weak.lock()) session->pushed_out();
    });
  };
  slot_ = server_.admission->enter(address_, std::move(pushed_out));
  asio::co_spawn(
      executor_, [self]() { return self->watchdog_.run(self->stream_); }, asio::detached);
  std::optional<Reply> closing;
  try {
    // One deadline for the first bytes, the handshake and the hello together, so a peer cannot
    // hold an unauthenticated slot for the sum of several timeouts.
    const auto hello_deadline = std::chrono::steady_clock::now() + limits_.handshake_timeout;
    watchdog_.arm(limits_.handshake_timeout);
    // Silent until the peer speaks: no TLS state and no handshake work for a socket that never
    // sends a byte.
    co_await stream_.socket().async_wait(net::tcp::socket::wait_read, net::use_awaitable);
    spoke_ = true;
    if (!server_.admission->speak(slot_)) {
      // No room among the handshaking connections; nothing can be said before TLS.
      server_.metrics->count_error("busy");
      throw boost::system::system_error(asio::error::connection_refused);
    }
    if (server_.tls) stream_.use_tls(*server_.tls);
    co_await stream_.handshake(net::ssl::stream_base::server);
    closing = co_await greet(hello_deadline);
    if (!closing) {
      if (auto full = server_.admission->authenticate(slot_)) {
        closing = Reply{"busy", *full, true};
      } else {
        co_await send_hello();
      }
    }
    while (!closing) {
      auto frame = co_await net::read_frame(stream_, &watchdog_, limits_.request,
                                            limits_.idle_timeout, limits_.read_timeout);
      if (!frame.ok()) {
        closing =
            Reply{std::string(wire::frame_errc_code(frame.error.errc)), frame.error.message, true};
        break;
      }
      server_.metrics->count_request(frame.value->type);
      auto reply = co_await handle(*frame.value);
      if (reply && reply->fatal)
        closing = std::move(reply);
      else if (reply)
        co_await send_error(*reply);
    }
    co_await send_error(*closing);
    watchdog_.arm(kLinger * 2);
    co_await stream_.close_gracefully(kLinger);
  } catch (const std::exception&) {
    // The peer left, the watchdog closed a stalled connection, or a newer connection took this
    // one's unauthenticated slot: nothing can be sent anymore.
    if (watchdog_.fired()) server_.metrics->count_error("timeout");
  }
  watchdog_.stop();
  stream_.close();
  server_.admission->leave(slot_);
  server_.metrics->connection_closed();
}

net::awaitable<std::optional<Reply>> Session::greet(
    std::chrono::steady_clock::time_point deadline) {
  const auto left = std::max(net::Millis(1), std::chrono::duration_cast<net::Millis>(
                                                 deadline - std::chrono::steady_clock::now()));
  auto frame = co_await net::read_frame(stream_, &watchdog_, limits_.request, left, left);
  if (!frame.ok())
    co_return Reply{std::string(wire::frame_errc_code(frame.error.errc)), frame.error.message,
                    true};
  const Frame& hello = *frame.value;
  server_.metrics->count_request(hello.type);
  if (hello.type != MessageType::kHello)
    co_return Reply{
        "unauthorized",
        "the first message must be hello, got " + std::string(wire::message_name(hello.type)),
        true};
  auto versions = hello.header.find("versions");
  bool speaks_ours = false;
  if (versions != hello.header.end() && versions->is_array())
    for (const auto& v : *versions)
      speaks_ours |= v.is_number_unsigned() && v.get<std::uint64_t>() == wire::kProtocolVersion;
  if (!speaks_ours)
    co_return Reply{
        "unsupported_version",
        "hello.versions must list protocol version " + std::to_string(wire::kProtocolVersion),
        true};
  auto token = wire::get_string(hello, "token");
  if (!token.ok() || !net::token_equal(*token, server_.config.token))
    co_return Reply{"unauthorized", "hello: the bearer token is missing or wrong", true};
  co_return std::nullopt;
}

net::awaitable<void> Session::send_hello() {
  json limits = {{"max_request_header", limits_.request.max_header},
                 {"snapshot_chunk", limits_.snapshot_chunk},
                 {"max_chunks_per_request", limits_.max_chunks_per_request}};
  json header = {{"version", wire::kProtocolVersion},
                 {"server", std::string(wire::kSoftwareName)},
                 {"capabilities", std::vector<std::string>(std::begin(wire::kCapabilities),
                                                           std::end(wire::kCapabilities))},
                 {"codecs", {"raw", "zstd", "planes", "delta", "xz"}},
                 {"limits", limits}};
  co_await send(MessageType::kHello, header);
}

net::awaitable<std::optional<Reply>> Session::handle(const Frame& request) {
  switch (request.type) {
    case MessageType::kGetTask: {
      auto task = server_.catalog->task();
      if (!task.ok()) co_return from_catalog(task.error(), "task");
      json header = {{"size", task->size()}};
      co_await send(MessageType::kTask, header, *task);
      co_return std::nullopt;
    }
    case MessageType::kGetLog:
      co_return co_await get_log(request);
    case MessageType::kSubscribe:
      co_return co_await subscribe(request);
    case MessageType::kGetSnapshot:
      co_return co_await get_snapshot(request);
    case MessageType::kGetChunks:
      co_return co_await get_chunks(request);
    case MessageType::kGetTrace:
      co_return co_await get_trace(request);
    default:
      co_return Reply{"bad_request", std::string(wire::message_name(request.type)) +
                                         " is not a request a client may send here"};
  }
}

net::awaitable<std::optional<Reply>> Session::get_log(const Frame& request) {
  auto from = wire::get_u64(request, "from_epoch");
  if (!from.ok()) co_return bad_request(from.error());
  auto records = server_.catalog->log_records(*from);
  if (!records.ok()) co_return from_catalog(records.error(), "log");
  // Records go out in batches of whole lines; the last frame says more=false.
  std::size_t i = 0;
  do {
    Bytes batch;
    std::uint64_t first = i < records->size() ? (*records)[i].record.epoch : *from;
    std::size_t count = 0;
    while (i < records->size() && (count == 0 || batch.size() < kLogBatchBytes)) {
      append_bytes(batch, encode_record((*records)[i++]));
      ++count;
    }
    json header = {{"from_epoch", first}, {"count", count}, {"more", i < records->size()}};
    co_await send(MessageType::kLog, header, batch);
  } while (i < records->size());
  co_return std::nullopt;
}

net::awaitable<std::optional<Reply>> Session::subscribe(const Frame& request) {
  auto from = wire::get_u64(request, "from_epoch");
  if (!from.ok()) co_return bad_request(from.error());
  auto signal = std::make_shared<CommitSignal>(executor_);
  {
    std::lock_guard lock(server_.mutex);
    server_.subscribers.insert(signal);
  }
  struct Unregister {
    Server::Impl& server;
    std::shared_ptr<CommitSignal> signal;
    ~Unregister() {
      std::lock_guard lock(server.mutex);
      server.subscribers.erase(signal);
    }
  } unregister{server_, signal};
  // From here on the connection only carries pushes: the client sends nothing more.
  std::uint64_t next = *from;
  for (;;) {
    std::uint64_t generation = server_.commit_generation.load();
    auto records = server_.catalog->log_records(next);
    if (!records.ok()) co_return from_catalog(records.error(), "log");
    for (const auto& r : *records) {
      json header = {{"epoch", r.record.epoch}};
      Bytes line = encode_record(r);
      co_await send(MessageType::kCommit, header, line);
      next = r.record.epoch + 1;
    }
    if (server_.commit_generation.load() != generation) continue;
    boost::system::error_code ec;
    co_await signal->timer.async_wait(asio::redirect_error(net::use_awaitable, ec));
  }
}

net::awaitable<void> run_session(Server::Impl& server, net::tcp::socket socket) {
  auto session = std::make_shared<Session>(server, std::move(socket));
  co_await session->run();
}

}  // namespace vt
