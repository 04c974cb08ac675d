// Snapshot downloads: a stream of checksummed chunks that survives a cut connection, then the
// checks that make the bytes trustworthy (docs/protocol.md, "get_snapshot").

#include <xxhash.h>

#include "protocol/net/client.h"

namespace vt {

using nlohmann::json;
using wire::Frame;
using wire::MessageType;

namespace {

bool same_request(const PartialDownload& p, const SnapshotRequest& r,
                  const std::optional<Digest>& base_root) {
  return !p.container_id.empty() && p.epoch == r.epoch && p.codec == r.codec &&
         p.base_root == base_root;
}

std::string xxh3_hex(ByteSpan bytes) {
  char sum[17];
  std::snprintf(sum, sizeof(sum), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return sum;
}

// The minimum-progress rule (ClientConfig::min_transfer_rate): each window of
// progress_window must add at least rate × window bytes, or the transfer is the provider's fault.
class ProgressRule {
 public:
  ProgressRule(const ClientConfig& config, std::uint64_t held)
      : config_(config), window_start_(std::chrono::steady_clock::now()), held_at_start_(held) {}

  // Empty while the transfer keeps up; else why it does not.
  std::string check(std::uint64_t held) {
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ < config_.progress_window) return {};
    const double seconds = std::chrono::duration<double>(now - window_start_).count();
    const auto moved = held - held_at_start_;
    const auto needed =
        static_cast<std::uint64_t>(static_cast<double>(config_.min_transfer_rate) * seconds);
    if (moved < needed) {
      return "only " + std::to_string(moved) + " bytes arrived in the last " +
             std::to_string(seconds).substr(0, 5) + " s, below the minimum transfer rate of " +
             std::to_string(config_.min_transfer_rate) + " bytes/s";
    }
    window_start_ = now;
    held_at_start_ = held;
    return {};
  }

 private:
  const ClientConfig& config_;
  std::chrono::steady_clock::time_point window_start_;
  std::uint64_t held_at_start_;
};

}  // namespace

Status Client::receive_container(const SnapshotRequest& request, PartialDownload& p,
                                 const ProgressFn& progress, std::uint64_t resumes,
                                 bool& caller_stopped) {
  json header = {{"epoch", request.epoch}, {"codec", std::string(comp::codec_name(request.codec))}};
  if (p.base_root) header["base_root"] = hex_encode(*p.base_root);
  if (!p.bytes.empty()) {
    header["offset"] = p.bytes.size();
    header["container_id"] = p.container_id;
  }
  VT_ASSIGN_OR_RETURN(
      Frame begin, this->request(MessageType::kGetSnapshot, header, MessageType::kSnapshotBegin));
  std::string what =
      "snapshot of epoch " + std::to_string(request.epoch) + " from " + connection_->where();
  VT_ASSIGN_OR_RETURN(std::uint64_t size, wire::get_u64(begin, "size"));
  VT_ASSIGN_OR_RETURN(std::uint64_t offset, wire::get_u64(begin, "offset"));
  VT_ASSIGN_OR_RETURN(std::string id, wire::get_string(begin, "container_id"));
  VT_ASSIGN_OR_RETURN(Digest root, wire::get_digest(begin, "root"));
  if (root != request.root)
    return rejected(what + ": the server offers a snapshot with root " + hex_encode(root) +
                    " but the log commits to " + hex_encode(request.root));
  // A provider declaring more than the task's state can take is wrong, not unlucky: rejected.
  const std::uint64_t max_container =
      config_.max_snapshot_bytes + config_.max_snapshot_bytes / 64 + (1u << 20);
  if (size > max_container)
    return rejected(what + ": the container is " + std::to_string(size) +
                    " bytes, more than a snapshot of this task " + "can take (" +
                    std::to_string(max_container) + ")");
  if (offset != p.bytes.size() || (offset > 0 && (id != p.container_id || size != p.total)))
    return io_error(what + ": the server resumed at offset " + std::to_string(offset) +
                    " of container " + id + ", not where this download stopped");
  p.container_id = id;
  p.total = size;
  reserve_large(p.bytes, size);  // bounded by max_snapshot_bytes above; saves regrowth copies
  ProgressRule rule(config_, p.bytes.size());
  while (p.bytes.size() < size) {
    if (auto slow = rule.check(p.bytes.size()); !slow.empty()) {
      connection_.reset();
      return rejected(what + ": " + slow);
    }
    // The payload is read straight into p.bytes; until it has passed its checks, any way out
    // of this iteration cuts it off again, so p.bytes stays a verified prefix to resume from.
    struct Trim {
      Bytes& bytes;
      std::size_t held;
      bool keep = false;
      ~Trim() {
        if (!keep) bytes.resize(held);
      }
    } trim{p.bytes, p.bytes.size()};
    const std::size_t held = trim.held;
    VT_ASSIGN_OR_RETURN(Frame data, next(MessageType::kSnapshotData, what, &p.bytes));
    VT_ASSIGN_OR_RETURN(std::uint64_t at, wire::get_u64(data, "offset"));
    ByteSpan payload = ByteSpan(p.bytes).subspan(held);
    if (at != held || payload.empty() || payload.size() > size - at) {
      // A protocol violation, not a bad link: TLS (or, in the clear, TCP) delivers what was sent.
      connection_.reset();
      return rejected(what + ": data frame at offset " + std::to_string(at) + " with " +
                      std::to_string(payload.size()) + " bytes does not continue the " +
                      std::to_string(held) + " bytes held of " + std::to_string(size));
    }
    // Under TLS every byte is already authenticated by its record's AEAD tag, so the checksum
    // is sent, and earns its cost, only on a plain (--insecure) connection, where TCP's 16-bit
    // sum is all there is.
    if (config_.insecure) {
      VT_ASSIGN_OR_RETURN(std::string sum, wire::get_string(data, "xxh3"));
      if (xxh3_hex(payload) != sum) {
        connection_.reset();
        return io_error(what + ": data frame at offset " + std::to_string(at) +
                        " fails its xxh3 checksum");
      }
    }
    trim.keep = true;
    if (progress && !progress({p.bytes.size(), size, resumes})) {
      // The server is still streaming into this connection; only a new one is in a known state.
      connection_.reset();
      caller_stopped = true;
      return io_error(what + ": stopped by the caller at byte " + std::to_string(p.bytes.size()) +
                      " of " + std::to_string(size));
    }
  }
  VT_ASSIGN_OR_RETURN(Frame end, next(MessageType::kSnapshotEnd, what));
  return {};
}

Result<Bytes> Client::fetch_container(const SnapshotRequest& request, const ProgressFn& progress,
                                      PartialDownload* partial) {
  std::optional<Digest> base_root = request.base_root;
  if (!base_root && !request.base.empty()) base_root = fp::merkle_root(request.base);
  PartialDownload local;
  PartialDownload& p = partial ? *partial : local;
  if (!same_request(p, request, base_root))
    p = PartialDownload{request.epoch, request.codec, base_root, {}, 0, {}};
  std::uint64_t resumes = 0;
  for (;;) {
    bool caller_stopped = false;
    Status got = in_sync(receive_container(request, p, progress, resumes, caller_stopped));
    if (got.ok()) break;
    bool mismatch = got.error().message.find("answered resume_mismatch") != std::string::npos;
    if (caller_stopped || (got.error().code != Errc::kIo && !mismatch)) return got.error();
    if (resumes >= static_cast<std::uint64_t>(std::max(config_.max_resumes, 0)))
      return got.error().context("snapshot download gave up after " + std::to_string(resumes) +
                                 " resumes");
    if (mismatch) p = PartialDownload{request.epoch, request.codec, base_root, {}, 0, {}};
    ++resumes;
    connection_.reset();
  }
  Bytes out = std::move(p.bytes);
  p = PartialDownload{};
  auto info = comp::read_container_info(out);
  if (!info.ok()) return info.error().context("snapshot of epoch " + std::to_string(request.epoch));
  if (info->root != request.root)
    return rejected("snapshot of epoch " + std::to_string(request.epoch) +
                    ": the container's root " + hex_encode(info->root) + " is not the committed " +
                    hex_encode(request.root));
  if (info->base_root && info->base_root != base_root)
    return rejected("snapshot of epoch " + std::to_string(request.epoch) +
                    ": the container is a delta against " + hex_encode(*info->base_root) +
                    ", which this client did not offer");
  return out;
}

Result<Bytes> Client::get_snapshot(const SnapshotRequest& request, const ProgressFn& progress,
                                   PartialDownload* partial) {
  VT_ASSIGN_OR_RETURN(Bytes container, fetch_container(request, progress, partial));
  VT_ASSIGN_OR_RETURN(comp::ContainerInfo info, comp::read_container_info(container));
  comp::DecodeOptions options;
  // The server may answer a delta request with a whole snapshot (it stores one every few
  // epochs); the base then must not be offered to the decoder.
  if (info.base_root) {
    options.base = request.base;
    options.base_root = request.base_root;
  }
  options.threads = 0;
  options.verify_root = true;
  options.max_raw_size = config_.max_snapshot_bytes;
  auto canonical = comp::decode(container, options);
  if (!canonical.ok())
    return rejected("snapshot of epoch " + std::to_string(request.epoch) +
                    " does not decode to its committed root " + hex_encode(request.root) + ": " +
                    canonical.error().message);
  return canonical;
}

}  // namespace vt
