// One client connection: TLS handshake, hello with the bearer token, then requests one at a time
// until the client leaves, a timeout fires or a frame breaks the format (docs/protocol.md).

#include <xxhash.h>

#include <boost/asio/post.hpp>

#include "common/sha256.h"
#include "protocol/net/chunk_proofs.h"
#include "protocol/net/server_impl.h"

namespace vt {

namespace asio = net::asio;
using nlohmann::json;
using wire::Frame;
using wire::MessageType;

namespace {

constexpr net::Millis kLinger{1000};
constexpr std::size_t kLogBatchBytes = 4u << 20;

// An error reply. Format and authentication errors end the connection; errors about what a
// well-formed request asked for do not.
struct Reply {
  std::string code;
  std::string message;
  bool fatal = false;
};

Reply from_catalog(const Error& error, std::string_view what) {
  std::string message = std::string(what) + ": " + error.message;
  if (error.code == Errc::kInvalidInput || error.code == Errc::kRejected)
    return {"not_found", message};
  return {"internal", message};
}

Reply bad_request(const Error& error) { return {"bad_request", error.message}; }

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl& server, net::tcp::socket socket)
      : server_(server),
        limits_(server.config.limits),
        executor_(socket.get_executor()),
        stream_(std::move(socket), server.tls.get()),
        watchdog_(executor_) {}

  net::awaitable<void> run();

 private:
  net::awaitable<void> send(MessageType type, const json& header, ByteSpan payload = {});
  net::awaitable<void> send_error(const Reply& reply);
  // Reads and checks the client's hello within `deadline`; a reply when it is refused.
  net::awaitable<std::optional<Reply>> greet(std::chrono::steady_clock::time_point deadline);
  net::awaitable<void> send_hello();
  net::awaitable<std::optional<Reply>> handle(const Frame& request);
  net::awaitable<std::optional<Reply>> get_log(const Frame& request);
  net::awaitable<std::optional<Reply>> subscribe(const Frame& request);
  net::awaitable<std::optional<Reply>> get_snapshot(const Frame& request);
  net::awaitable<std::optional<Reply>> get_chunks(const Frame& request);

  Server::Impl& server_;
  const ServerLimits& limits_;
  asio::any_io_executor executor_;
  net::Stream stream_;
  net::Watchdog watchdog_;
};

net::awaitable<void> Session::send(MessageType type, const json& header, ByteSpan payload) {
  Bytes head = wire::encode_head(type, header, static_cast<std::uint32_t>(payload.size()));
  watchdog_.arm(limits_.write_timeout);
  // Buffers are built outside co_await: GCC 12 miscompiles braced lists in a co_await
  // expression ("array used as initializer"), so every header below is a local too.
  std::vector<asio::const_buffer> buffers{asio::buffer(head),
                                          asio::buffer(payload.data(), payload.size())};
  co_await stream_.write_all(buffers);
  watchdog_.disarm();
  server_.metrics->add_bytes_sent(head.size() + payload.size());
  // The TLS stream only yields when the socket is full, so a fast reader could keep this thread
  // for a whole snapshot; one turn per frame lets the other connections on it move too.
  co_await asio::post(executor_, net::use_awaitable);
}

net::awaitable<void> Session::send_error(const Reply& reply) {
  server_.metrics->count_error(reply.code);
  json header = {{"code", reply.code}, {"message", reply.message}};
  co_await send(MessageType::kError, header);
}

net::awaitable<void> Session::run() {
  auto self = shared_from_this();
  server_.metrics->connection_opened();
  boost::system::error_code ec;
  const std::string address = stream_.socket().remote_endpoint(ec).address().to_string();
  // A newer connection may push this one out while it has not said hello yet: closing the
  // stream on its own strand ends whatever it waits for.
  auto evict = [weak = weak_from_this(), executor = executor_] {
    asio::post(executor, [weak] {
      if (auto session = weak.lock()) session->stream_.close();
    });
  };
  const std::optional<std::uint64_t> slot = server_.admission->enter(address, std::move(evict));
  if (!slot) {
    // No room even before TLS: nothing can be said to the peer, so it is only counted.
    server_.metrics->count_error("busy");
    stream_.close();
    server_.metrics->connection_closed();
    co_return;
  }
  asio::co_spawn(
      executor_, [self]() { return self->watchdog_.run(self->stream_); }, asio::detached);
  std::optional<Reply> closing;
  try {
    // One deadline for the handshake and the hello together, so a peer cannot hold its
    // unauthenticated slot for the sum of two timeouts.
    const auto hello_deadline = std::chrono::steady_clock::now() + limits_.handshake_timeout;
    watchdog_.arm(limits_.handshake_timeout);
    co_await stream_.handshake(net::ssl::stream_base::server);
    closing = co_await greet(hello_deadline);
    if (!closing) {
      if (auto full = server_.admission->authenticate(*slot)) {
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
  server_.admission->leave(*slot);
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

net::awaitable<std::optional<Reply>> Session::get_snapshot(const Frame& request) {
  auto epoch = wire::get_u64(request, "epoch");
  if (!epoch.ok()) co_return bad_request(epoch.error());
  ContainerRequest want{*epoch, comp::Codec::kPlanes, std::nullopt};
  if (auto codec = wire::get_optional_string(request, "codec"); !codec.ok()) {
    co_return bad_request(codec.error());
  } else if (*codec) {
    auto parsed = comp::parse_codec(**codec);
    if (!parsed.ok()) co_return bad_request(parsed.error().context("get_snapshot.codec"));
    want.codec = *parsed;
  }
  if (request.header.contains("base_root") && !request.header["base_root"].is_null()) {
    auto base = wire::get_digest(request, "base_root");
    if (!base.ok()) co_return bad_request(base.error());
    want.base_root = *base;
  }
  std::uint64_t offset = 0;
  if (request.header.contains("offset")) {
    auto o = wire::get_u64(request, "offset");
    if (!o.ok()) co_return bad_request(o.error());
    offset = *o;
  }
  auto container = server_.catalog->container(want);
  if (!container.ok())
    co_return from_catalog(container.error(), "snapshot of epoch " + std::to_string(*epoch));
  const Bytes& bytes = **container;
  auto info = comp::read_container_info(bytes);
  if (!info.ok())
    co_return from_catalog(info.error(), "stored container of epoch " + std::to_string(*epoch));
  // Names the container for a resume. The header and section table carry every section's
  // XXH3-64, so hashing them tells a changed container from the same one without reading the
  // payloads; the client's trust comes from the Merkle root after decoding, not from this.
  const std::uint64_t payloads =
      info->sections.empty() ? bytes.size() : info->sections.front().payload_offset;
  std::string id = hex_encode(sha256(ByteSpan(bytes).first(payloads)));
  if (offset > 0) {
    auto claimed = wire::get_optional_string(request, "container_id");
    if (!claimed.ok() || !*claimed || **claimed != id)
      co_return Reply{"resume_mismatch", "cannot resume at offset " + std::to_string(offset) +
                                             ": the container is now " + id +
                                             "; restart from offset 0"};
    if (offset > bytes.size())
      co_return Reply{"bad_request", "get_snapshot.offset " + std::to_string(offset) +
                                         " is past the end of the " + std::to_string(bytes.size()) +
                                         "-byte container"};
    server_.metrics->count_resume();
  }
  json begin = {{"epoch", *epoch},
                {"codec", std::string(comp::codec_name(info->codec))},
                {"root", hex_encode(info->root)},
                {"base_root", info->base_root ? json(hex_encode(*info->base_root)) : json(nullptr)},
                {"size", bytes.size()},
                {"offset", offset},
                {"container_id", id},
                {"chunk", limits_.snapshot_chunk}};
  co_await send(MessageType::kSnapshotBegin, begin);
  auto keep_alive = *container;  // the catalog may drop its copy while this stream runs
  for (std::uint64_t at = offset; at < bytes.size(); at += limits_.snapshot_chunk) {
    ByteSpan piece = ByteSpan(bytes).subspan(
        at, std::min<std::uint64_t>(limits_.snapshot_chunk, bytes.size() - at));
    json header = {{"offset", at}};
    // Under TLS each record's AEAD tag already authenticates these bytes (docs/protocol.md).
    if (!stream_.is_tls()) {
      char sum[17];
      std::snprintf(sum, sizeof(sum), "%016llx",
                    static_cast<unsigned long long>(XXH3_64bits(piece.data(), piece.size())));
      header["xxh3"] = sum;
    }
    co_await send(MessageType::kSnapshotData, header, piece);
  }
  json end = {{"size", bytes.size()}};
  co_await send(MessageType::kSnapshotEnd, end);
  co_return std::nullopt;
}

net::awaitable<std::optional<Reply>> Session::get_chunks(const Frame& request) {
  auto epoch = wire::get_u64(request, "epoch");
  if (!epoch.ok()) co_return bad_request(epoch.error());
  auto list = request.header.find("chunks");
  if (list == request.header.end() || !list->is_array() || list->empty())
    co_return Reply{"bad_request", "get_chunks.chunks must be a non-empty array of chunk indices"};
  if (list->size() > limits_.max_chunks_per_request)
    co_return Reply{"bad_request", "get_chunks asks for " + std::to_string(list->size()) +
                                       " chunks; the limit is " +
                                       std::to_string(limits_.max_chunks_per_request) +
                                       " per request"};
  std::vector<std::uint64_t> indices;
  for (const auto& v : *list) {
    if (!v.is_number_unsigned())
      co_return Reply{"bad_request", "get_chunks.chunks must hold non-negative integers"};
    indices.push_back(v.get<std::uint64_t>());
  }
  auto canonical = server_.catalog->canonical_snapshot(*epoch);
  if (!canonical.ok())
    co_return from_catalog(canonical.error(), "snapshot of epoch " + std::to_string(*epoch));
  const Bytes& bytes = **canonical;
  auto proofs = wire::prove_chunks(bytes, indices);
  if (!proofs.ok()) co_return Reply{"bad_request", "get_chunks: " + proofs.error().message};
  for (const auto& proof : *proofs) {
    json siblings = json::array();
    for (const auto& s : proof.siblings) siblings.push_back(hex_encode(s));
    std::uint64_t begin = proof.chunk_index * fp::kMerkleChunkSize;
    ByteSpan chunk = ByteSpan(bytes).subspan(
        begin, std::min<std::uint64_t>(fp::kMerkleChunkSize, bytes.size() - begin));
    json header = {{"epoch", *epoch},
                   {"index", proof.chunk_index},
                   {"chunk_count", proof.chunk_count},
                   {"siblings", siblings}};
    co_await send(MessageType::kChunk, header, chunk);
  }
  json end = {{"count", proofs->size()}};
  co_await send(MessageType::kChunksEnd, end);
  co_return std::nullopt;
}

}  // namespace

net::awaitable<void> run_session(Server::Impl& server, net::tcp::socket socket) {
  auto session = std::make_shared<Session>(server, std::move(socket));
  co_await session->run();
}

}  // namespace vt
