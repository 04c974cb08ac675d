// The requests that stream or prove a snapshot. Their catalog calls may read, decode or code a
// whole snapshot, so they run on the slow-work threads (protocol/net/slow_work.h) while the
// session waits on its strand, and the I/O threads stay free for every other client.

#include <xxhash.h>

#include <boost/asio/post.hpp>

#include "common/sha256.h"
#include "protocol/net/chunk_proofs.h"
#include "protocol/net/server_session.h"

namespace vt {

namespace asio = net::asio;
using nlohmann::json;
using wire::Frame;
using wire::MessageType;

template <typename T>
net::awaitable<T> Session::off_io(std::function<T()> call) {
  auto initiate = [this, call = std::move(call)](auto handler) mutable {
    // std::function needs a copyable job; the coroutine's handler is move-only.
    auto waiting = std::make_shared<decltype(handler)>(std::move(handler));
    server_.slow->submit(address_, [waiting, call = std::move(call), executor = executor_] {
      // An exception must cost this request, not the process (it would end a worker thread).
      T result = internal_error("slow work did not run");
      try {
        result = call();
      } catch (const std::exception& e) {
        result = internal_error(std::string("slow work: ") + e.what());
      }
      asio::post(executor, [waiting, result = std::move(result)]() mutable {
        (*waiting)(std::move(result));
      });
    });
  };
  co_return co_await asio::async_initiate<decltype(net::use_awaitable), void(T)>(
      std::move(initiate), net::use_awaitable);
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
  std::function<Result<std::shared_ptr<const Bytes>>()> load = [catalog = server_.catalog, want] {
    return catalog->container(want);
  };
  auto container = co_await off_io(std::move(load));
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
  // The proofs hash the whole snapshot: slow work, like loading it.
  struct Proven {
    std::shared_ptr<const Bytes> bytes;
    std::vector<fp::InclusionProof> proofs;
    std::string bad_index;  // set when an index is past the snapshot's chunks
  };
  std::function<Result<Proven>()> prove = [catalog = server_.catalog, epoch = *epoch,
                                           indices]() -> Result<Proven> {
    auto canonical = catalog->canonical_snapshot(epoch);
    if (!canonical.ok()) return canonical.error();
    auto proofs = wire::prove_chunks(**canonical, indices);
    if (!proofs.ok()) return Proven{nullptr, {}, proofs.error().message};
    return Proven{*canonical, std::move(*proofs), {}};
  };
  auto proven = co_await off_io(std::move(prove));
  if (!proven.ok())
    co_return from_catalog(proven.error(), "snapshot of epoch " + std::to_string(*epoch));
  if (!proven->bad_index.empty())
    co_return Reply{"bad_request", "get_chunks: " + proven->bad_index};
  const Bytes& bytes = *proven->bytes;
  const auto& proofs = proven->proofs;
  for (const auto& proof : proofs) {
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
  json end = {{"count", proofs.size()}};
  co_await send(MessageType::kChunksEnd, end);
  co_return std::nullopt;
}

// The provider's answer for one step: replaying it is slow work; the bytes go out in frames of
// the snapshot chunk size, the last with more: false.
net::awaitable<std::optional<Reply>> Session::get_trace(const Frame& request) {
  auto epoch = wire::get_u64(request, "epoch");
  if (!epoch.ok()) co_return bad_request(epoch.error());
  auto step = wire::get_u64(request, "step");
  if (!step.ok()) co_return bad_request(step.error());
  if (*epoch == 0 || *step == 0)
    co_return Reply{"bad_request", "get_trace: epoch and step count from 1"};
  TraceRequest want{*epoch, *step, std::nullopt};
  if (request.header.contains("call") && !request.header["call"].is_null()) {
    auto call = wire::get_u64(request, "call");
    if (!call.ok()) co_return bad_request(call.error());
    want.call = *call;
  }
  std::function<Result<std::shared_ptr<const Bytes>>()> answer = [catalog = server_.catalog, want] {
    return catalog->step_trace(want);
  };
  auto answered = co_await off_io(std::move(answer));
  const std::string what =
      "trace of step " + std::to_string(*step) + " of epoch " + std::to_string(*epoch);
  if (!answered.ok()) co_return from_catalog(answered.error(), what);
  auto keep_alive = *answered;
  const Bytes& bytes = *keep_alive;
  std::uint64_t at = 0;
  do {
    const std::uint64_t n = std::min<std::uint64_t>(limits_.snapshot_chunk, bytes.size() - at);
    json header = {{"offset", at}, {"size", bytes.size()}, {"more", at + n < bytes.size()}};
    co_await send(MessageType::kTrace, header, ByteSpan(bytes).subspan(at, n));
    at += n;
  } while (at < bytes.size());
  co_return std::nullopt;
}

}  // namespace vt
