#pragma once
// The verifier's side of the protocol (docs/protocol.md): blocking calls with deadlines over one
// Connection, reconnecting (hello again) when a call finds it closed. Snapshots come back as
// verified canonical bytes; chunks come back with checked inclusion proofs. Not thread-safe:
// one Client per thread.

#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "compression/container.h"
#include "fingerprint/merkle.h"
#include "protocol/log.h"
#include "protocol/net/connection.h"

namespace vt {

struct ServerHello {
  std::uint64_t version = 0;
  std::string software;
  std::vector<std::string> capabilities;
  std::vector<std::string> codecs;
  nlohmann::json limits;
};

struct SnapshotRequest {
  std::uint64_t epoch = 0;
  Digest root{};  // the committed root, from a verified log: what the bytes must hash to
  comp::Codec codec = comp::Codec::kPlanes;
  // A snapshot the caller already holds (e.g. the epoch before): the server may then send a
  // delta against it. base_root is computed from base when absent.
  ByteSpan base;
  std::optional<Digest> base_root;
};

struct SnapshotProgress {
  std::uint64_t received = 0;  // container bytes held so far
  std::uint64_t total = 0;     // container size
  std::uint64_t resumes = 0;   // reconnects within this call
};
// Return false to stop the download; what arrived stays in the PartialDownload, if one was given.
using ProgressFn = std::function<bool(const SnapshotProgress&)>;

// What a cut download keeps, so that a later call (even from another Client) continues at
// bytes.size() instead of starting over. The server refuses to resume if its container for the
// same request is no longer container_id; the download then restarts from 0.
struct PartialDownload {
  std::uint64_t epoch = 0;
  comp::Codec codec = comp::Codec::kPlanes;
  std::optional<Digest> base_root;
  std::string container_id;
  std::uint64_t total = 0;
  Bytes bytes;
};

struct VerifiedChunk {
  fp::InclusionProof proof;  // proof.chunk_index says which chunk
  Bytes bytes;
};

class Client {
 public:
  // Connects and says hello; a wrong token or version fails here. kInvalidInput only for the
  // caller's own settings (ClientConfig); whatever the server answers wrong is kRejected, and
  // the network kIo.
  static Result<Client> connect(ClientConfig config);
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  const ServerHello& hello() const { return hello_; }
  // The largest canonical snapshot accepted from here on (ClientConfig::max_snapshot_bytes).
  void set_max_snapshot_bytes(std::uint64_t n) { config_.max_snapshot_bytes = n; }

  Result<Bytes> get_task();
  // Records with epoch >= from_epoch, decoded and in order, each checked as it arrives
  // (LogStreamCheck: count, size, epoch, signature under the log's key, chain): the first that
  // breaks `bounds` ends the read, rejected, naming its epoch and line, and so does a frame that
  // promises more but carries none. An endless or forged log cannot fill memory. Which task the
  // records name and whose key signed them are the caller's to judge (verify_log).
  Result<std::vector<SignedRecord>> get_log(std::uint64_t from_epoch = 0,
                                            const LogBounds& bounds = {});

  // The container bytes as stored, with the committed root checked against the container's
  // header; on plain TCP each chunk is also checked against its xxh3 (TLS authenticates every
  // record). Not yet trustworthy: only decoding with the root check (get_snapshot) proves the
  // bytes are the committed state. Resumes after a cut connection up to max_resumes times.
  Result<Bytes> fetch_container(const SnapshotRequest& request, const ProgressFn& progress = {},
                                PartialDownload* partial = nullptr);
  // fetch_container, then decode: the canonical bytes, whose Merkle root is checked to be
  // request.root (kRejected if not).
  Result<Bytes> get_snapshot(const SnapshotRequest& request, const ProgressFn& progress = {},
                             PartialDownload* partial = nullptr);

  // 1 MiB chunks of the canonical bytes of `epoch`, each proven against `root` (kRejected if a
  // proof fails), in the order asked.
  Result<std::vector<VerifiedChunk>> get_chunks(std::uint64_t epoch, const Digest& root,
                                                std::span<const std::uint64_t> indices);

  // The provider's answer for one step (docs/dispute.md): its signed step trace, or with `call`
  // its values of that call, as the JSON text it sent (the caller checks it). The provider
  // replays the step to answer: the first frame may take up to `wait`. An answer larger than
  // `max_bytes` is refused (rejected) before it is read.
  Result<Bytes> get_trace(std::uint64_t epoch, std::uint64_t step,
                          std::optional<std::uint64_t> call, std::uint64_t max_bytes,
                          std::chrono::milliseconds wait);

  // Calls on_commit with each record of epoch >= from_epoch as the server pushes it (the ones
  // already durable first), until on_commit returns false (ok) or no commitment arrives within
  // `wait` (an I/O error naming the wait), or a record breaks `bounds` (rejected, as get_log).
  // The subscription uses the connection up: the next call reconnects.
  Status subscribe(std::uint64_t from_epoch,
                   const std::function<bool(const SignedRecord&)>& on_commit,
                   std::chrono::milliseconds wait, const LogBounds& bounds = {});

 private:
  Client(ClientConfig config, Connection connection, ServerHello hello);
  Status ensure_connected();
  // Sends a request and reads the first frame of the answer; error frames become errors.
  Result<wire::Frame> request(wire::MessageType type, const nlohmann::json& header,
                              wire::MessageType expect);
  // With `payload_sink` a frame's payload is appended there (Connection::read_frame_into).
  Result<wire::Frame> next(wire::MessageType expect, std::string_view what,
                           Bytes* payload_sink = nullptr);
  Result<std::vector<SignedRecord>> get_log_frames(std::uint64_t from_epoch,
                                                   const LogBounds& bounds);
  Result<Bytes> get_trace_frames(std::uint64_t epoch, std::uint64_t step,
                                 std::optional<std::uint64_t> call, std::uint64_t max_bytes,
                                 std::chrono::milliseconds wait);
  Result<std::vector<VerifiedChunk>> get_chunk_frames(std::uint64_t epoch, const Digest& root,
                                                      std::span<const std::uint64_t> indices);
  // A call that failed before reading its whole answer leaves frames in the stream; only an
  // error frame (which is a whole answer) keeps the connection in step for the next call.
  template <typename T>
  T in_sync(T result) {
    if (!result.ok() && !answered_) connection_.reset();
    return result;
  }
  Status receive_container(const SnapshotRequest& request, PartialDownload& partial,
                           const ProgressFn& progress, std::uint64_t resumes, bool& caller_stopped);

  ClientConfig config_;
  std::optional<Connection> connection_;
  ServerHello hello_;
  bool answered_ = false;  // the last request was answered by an error frame
};

// An error frame as an Error: the code decides the class (docs/protocol.md), the message is
// the server's, prefixed with where and what.
Error server_error(const wire::Frame& error_frame, std::string_view where);

}  // namespace vt
