#include "protocol/net/client.h"

namespace vt {

using nlohmann::json;
using wire::Frame;
using wire::MessageType;

namespace {

Result<ServerHello> exchange_hello(Connection& connection, const ClientConfig& config) {
  std::string where = "hello to " + connection.where();
  VT_RETURN_IF_ERROR(
      connection.send(MessageType::kHello, {{"versions", {wire::kProtocolVersion}},
                                            {"token", config.token},
                                            {"software", std::string(wire::kSoftwareName)}}));
  VT_ASSIGN_OR_RETURN(Frame frame, connection.read_frame(config.connect_timeout));
  if (frame.type == MessageType::kError) return server_error(frame, where);
  if (frame.type != MessageType::kHello)
    return io_error(where + ": expected hello, got " + std::string(wire::message_name(frame.type)));
  ServerHello hello;
  VT_ASSIGN_OR_RETURN(hello.version, wire::get_u64(frame, "version"));
  if (hello.version != wire::kProtocolVersion)
    return io_error(where + ": the server speaks protocol version " +
                    std::to_string(hello.version) + ", this client " +
                    std::to_string(wire::kProtocolVersion));
  auto software = wire::get_optional_string(frame, "server");
  if (software.ok() && *software) hello.software = **software;
  for (const char* field : {"capabilities", "codecs"}) {
    auto it = frame.header.find(field);
    if (it == frame.header.end() || !it->is_array()) continue;
    auto& out = std::string_view(field) == "codecs" ? hello.codecs : hello.capabilities;
    for (const auto& v : *it)
      if (v.is_string()) out.push_back(v.get<std::string>());
  }
  if (auto it = frame.header.find("limits"); it != frame.header.end()) hello.limits = *it;
  return hello;
}

// What the server answers to hello is its own doing: a refusal, a field it got wrong or a frame
// that breaks the format is never the caller's input error, only the network's (kIo) or the
// server's (kRejected).
Result<ServerHello> say_hello(Connection& connection, const ClientConfig& config) {
  auto hello = exchange_hello(connection, config);
  if (!hello.ok() && hello.error().code == Errc::kInvalidInput)
    return rejected(hello.error().message);
  return hello;
}

}  // namespace

Error server_error(const Frame& frame, std::string_view where) {
  std::string code = "unknown", message;
  if (auto c = wire::get_optional_string(frame, "code"); c.ok() && *c) code = **c;
  if (auto m = wire::get_optional_string(frame, "message"); m.ok() && *m) message = **m;
  std::string text = std::string(where) + ": the server answered " + code + ": " + message;
  // The provider says a state it committed cannot be produced: its own evidence failed.
  if (code == "unusable_state") return rejected(text);
  if (code == "unauthorized" || code == "not_found" || code == "bad_request" ||
      code == "unsupported_version")
    return invalid_input(text);
  return io_error(text);
}

Client::Client(ClientConfig config, Connection connection, ServerHello hello)
    : config_(std::move(config)), connection_(std::move(connection)), hello_(std::move(hello)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::connect(ClientConfig config) {
  VT_ASSIGN_OR_RETURN(Connection connection, Connection::open(config));
  VT_ASSIGN_OR_RETURN(ServerHello hello, say_hello(connection, config));
  return Client(std::move(config), std::move(connection), std::move(hello));
}

Status Client::ensure_connected() {
  if (connection_ && connection_->is_open()) return {};
  connection_.reset();
  VT_ASSIGN_OR_RETURN(Connection connection, Connection::open(config_));
  VT_ASSIGN_OR_RETURN(hello_, say_hello(connection, config_));
  connection_.emplace(std::move(connection));
  return {};
}

Result<Frame> Client::next(MessageType expect, std::string_view what, Bytes* payload_sink) {
  auto frame = payload_sink ? connection_->read_frame_into(*payload_sink, config_.io_timeout)
                            : connection_->read_frame();
  if (!frame.ok()) {
    connection_.reset();  // a stream that failed mid-frame cannot be resynchronised
    return frame.error().context(what);
  }
  if (frame->type == MessageType::kError) {
    answered_ = true;
    return server_error(*frame, what);
  }
  if (frame->type != expect) {
    connection_.reset();
    return io_error(std::string(what) + ": expected " + std::string(wire::message_name(expect)) +
                    ", got " + std::string(wire::message_name(frame->type)));
  }
  return frame;
}

Result<Frame> Client::request(MessageType type, const json& header, MessageType expect) {
  answered_ = false;
  VT_RETURN_IF_ERROR(ensure_connected());
  std::string what = std::string(wire::message_name(type)) + " from " + connection_->where();
  if (auto sent = connection_->send(type, header); !sent.ok()) {
    connection_.reset();
    return sent.error();
  }
  return next(expect, what);
}

Result<Bytes> Client::get_task() {
  VT_ASSIGN_OR_RETURN(Frame frame,
                      request(MessageType::kGetTask, json::object(), MessageType::kTask));
  return std::move(frame.payload);
}

Result<std::vector<SignedRecord>> Client::get_log(std::uint64_t from_epoch,
                                                  const LogBounds& bounds) {
  return in_sync(get_log_frames(from_epoch, bounds));
}

Result<std::vector<SignedRecord>> Client::get_log_frames(std::uint64_t from_epoch,
                                                         const LogBounds& bounds) {
  std::string what = "get_log from " + (connection_ ? connection_->where() : config_.host);
  VT_ASSIGN_OR_RETURN(
      Frame frame, request(MessageType::kGetLog, {{"from_epoch", from_epoch}}, MessageType::kLog));
  std::vector<SignedRecord> records;
  LogStreamCheck check(bounds, from_epoch);
  // A provider that breaks the bounds is not read any further: what it would send next is
  // unread bytes in the stream, so the connection goes.
  auto stop = [&](const Status& s) {
    connection_.reset();
    return s.error();
  };
  for (;;) {
    ByteSpan payload = frame.payload;
    const std::size_t held = records.size();
    std::size_t start = 0;
    for (std::size_t i = 0; i < payload.size(); ++i) {
      if (payload[i] != '\n') continue;
      if (bounds.head_only && check.full()) {
        connection_.reset();
        return records;
      }
      const std::uint64_t line = i + 1 - start;
      if (auto admitted = check.admit(line, what); !admitted) return stop(admitted);
      auto record = decode_record(payload.subspan(start, line),
                                  what + ": " + log_position(check.next_epoch()));
      if (!record) return stop(rejected(record.error().message));
      if (auto accepted = check.accept(*record, what); !accepted) return stop(accepted);
      records.push_back(std::move(*record));
      start = i + 1;
    }
    if (start != payload.size()) return invalid_input(what + ": a log frame ends inside a record");
    auto more = frame.header.find("more");
    if (more == frame.header.end() || !more->is_boolean() || !more->get<bool>()) break;
    if (bounds.head_only && check.full()) {
      connection_.reset();
      return records;
    }
    if (records.size() == held) {
      connection_.reset();
      return rejected(what + ": a log frame after epoch " + std::to_string(from_epoch + held) +
                      " promises more records but carries none");
    }
    VT_ASSIGN_OR_RETURN(frame, next(MessageType::kLog, what));
  }
  return records;
}

Result<Bytes> Client::get_trace(std::uint64_t epoch, std::uint64_t step,
                                std::optional<std::uint64_t> call, std::uint64_t max_bytes,
                                std::chrono::milliseconds wait) {
  return in_sync(get_trace_frames(epoch, step, call, max_bytes, wait));
}

Result<Bytes> Client::get_trace_frames(std::uint64_t epoch, std::uint64_t step,
                                       std::optional<std::uint64_t> call, std::uint64_t max_bytes,
                                       std::chrono::milliseconds wait) {
  answered_ = false;
  VT_RETURN_IF_ERROR(ensure_connected());
  json header = {{"epoch", epoch}, {"step", step}};
  if (call) header["call"] = *call;
  const std::string what = "get_trace of step " + std::to_string(step) + " of epoch " +
                           std::to_string(epoch) + " from " + connection_->where();
  if (auto sent = connection_->send(MessageType::kGetTrace, header); !sent.ok()) {
    connection_.reset();
    return sent.error();
  }
  // The provider replays the step before its first frame: that one may take `wait`.
  auto first = connection_->read_frame(wait);
  if (!first.ok()) {
    connection_.reset();
    return first.error().context(what);
  }
  if (first->type == MessageType::kError) {
    answered_ = true;
    return server_error(*first, what);
  }
  Frame frame = std::move(*first);
  Bytes out;
  for (;;) {
    if (frame.type != MessageType::kTrace) {
      connection_.reset();
      return io_error(what + ": expected trace, got " +
                      std::string(wire::message_name(frame.type)));
    }
    VT_ASSIGN_OR_RETURN(std::uint64_t offset, wire::get_u64(frame, "offset"));
    VT_ASSIGN_OR_RETURN(std::uint64_t size, wire::get_u64(frame, "size"));
    if (size > max_bytes) {
      connection_.reset();
      return rejected(what + ": an answer of " + std::to_string(size) + " bytes, more than the " +
                      std::to_string(max_bytes) + " accepted");
    }
    if (offset != out.size() || offset + frame.payload.size() > size) {
      connection_.reset();
      return rejected(what + ": a trace frame at offset " + std::to_string(offset) +
                      " does not continue the " + std::to_string(out.size()) + " bytes so far");
    }
    append_bytes(out, frame.payload);
    auto more = frame.header.find("more");
    const bool more_frames = more != frame.header.end() && more->is_boolean() && more->get<bool>();
    if (!more_frames) {
      if (out.size() != size) {
        connection_.reset();
        return rejected(what + ": the answer ends after " + std::to_string(out.size()) + " of " +
                        std::to_string(size) + " bytes");
      }
      return out;
    }
    if (frame.payload.empty()) {
      connection_.reset();
      return rejected(what + ": a trace frame promises more but carries nothing");
    }
    VT_ASSIGN_OR_RETURN(frame, next(MessageType::kTrace, what));
  }
}

Result<std::vector<VerifiedChunk>> Client::get_chunks(std::uint64_t epoch, const Digest& root,
                                                      std::span<const std::uint64_t> indices) {
  return in_sync(get_chunk_frames(epoch, root, indices));
}

Result<std::vector<VerifiedChunk>> Client::get_chunk_frames(
    std::uint64_t epoch, const Digest& root, std::span<const std::uint64_t> indices) {
  json list = json::array();
  for (auto i : indices) list.push_back(i);
  VT_ASSIGN_OR_RETURN(
      Frame frame,
      request(MessageType::kGetChunks, {{"epoch", epoch}, {"chunks", list}}, MessageType::kChunk));
  std::string what =
      "get_chunks of epoch " + std::to_string(epoch) + " from " + connection_->where();
  std::vector<VerifiedChunk> out;
  for (std::size_t n = 0; n < indices.size(); ++n) {
    if (n > 0) {
      VT_ASSIGN_OR_RETURN(frame, next(MessageType::kChunk, what));
    }
    VerifiedChunk chunk;
    VT_ASSIGN_OR_RETURN(chunk.proof.chunk_index, wire::get_u64(frame, "index"));
    VT_ASSIGN_OR_RETURN(chunk.proof.chunk_count, wire::get_u64(frame, "chunk_count"));
    auto siblings = frame.header.find("siblings");
    if (siblings == frame.header.end() || !siblings->is_array() || siblings->size() > 64)
      return invalid_input(what +
                           ": chunk header needs a \"siblings\" array of at most 64 digests");
    for (const auto& s : *siblings) {
      if (!s.is_string()) return invalid_input(what + ": siblings must be hex digests");
      VT_ASSIGN_OR_RETURN(Digest d, digest_from_hex(s.get<std::string>(), what + " sibling"));
      chunk.proof.siblings.push_back(d);
    }
    if (chunk.proof.chunk_index != indices[n])
      return invalid_input(what + ": asked for chunk " + std::to_string(indices[n]) +
                           ", got chunk " + std::to_string(chunk.proof.chunk_index));
    chunk.bytes = std::move(frame.payload);
    if (!fp::verify_chunk(root, chunk.bytes, chunk.proof))
      return rejected(what + ": chunk " + std::to_string(indices[n]) + " (" +
                      std::to_string(chunk.bytes.size()) +
                      " bytes) does not prove against the committed root " + hex_encode(root));
    out.push_back(std::move(chunk));
  }
  VT_ASSIGN_OR_RETURN(frame, next(MessageType::kChunksEnd, what));
  return out;
}

Status Client::subscribe(std::uint64_t from_epoch,
                         const std::function<bool(const SignedRecord&)>& on_commit,
                         std::chrono::milliseconds wait, const LogBounds& bounds) {
  VT_RETURN_IF_ERROR(ensure_connected());
  std::string what = "subscription at " + connection_->where();
  VT_RETURN_IF_ERROR(connection_->send(MessageType::kSubscribe, {{"from_epoch", from_epoch}}));
  LogStreamCheck check(bounds, from_epoch);
  auto stop = [&](const Error& e) {
    connection_.reset();
    return e;
  };
  for (;;) {
    auto frame = connection_->read_frame(wait);
    if (!frame.ok()) {
      return stop(frame.error().context(what + " (waiting for epoch " +
                                        std::to_string(check.next_epoch()) + ")"));
    }
    if (frame->type == MessageType::kError) return stop(server_error(*frame, what));
    if (frame->type != MessageType::kCommit) {
      return stop(io_error(what + ": expected commit, got " +
                           std::string(wire::message_name(frame->type))));
    }
    if (auto admitted = check.admit(frame->payload.size(), what); !admitted)
      return stop(admitted.error());
    auto record = decode_record(frame->payload, what + ": " + log_position(check.next_epoch()));
    if (!record) return stop(rejected(record.error().message));
    if (auto accepted = check.accept(*record, what); !accepted) return stop(accepted.error());
    if (!on_commit(*record)) break;
  }
  connection_.reset();
  return {};
}

}  // namespace vt
