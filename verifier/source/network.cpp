#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "common/activity.h"
#include "common/fd.h"
#include "dispute/step_trace.h"
#include "protocol/net/client.h"
#include "verifier/source/source.h"

namespace vt::verifier {
namespace {

// Once the provider has been reached, evidence it fails to deliver is its failure: a transfer
// that breaks is retried on a fresh connection until `evidence_timeout` has passed since the
// first attempt, and then the evidence counts as withheld (a rejection, not an I/O error).
class ProviderSource final : public EvidenceSource {
 public:
  ProviderSource(Client client, ClientConfig config, std::string where,
                 std::chrono::milliseconds evidence_timeout)
      : client_(std::move(client)),
        config_(std::move(config)),
        where_(std::move(where)),
        evidence_timeout_(evidence_timeout) {}

  // A subscription occupies its connection, and the checks made while it runs fetch snapshots:
  // so it gets a second connection of its own.
  Status follow(std::uint64_t from, const std::function<bool(const SignedRecord&)>& on_commit,
                std::chrono::milliseconds wait) override {
    auto watcher = Client::connect(config_);
    if (!watcher) return watcher.error().context("subscribing to " + where_);
    LogBounds bounds = limits_.log;
    if (from > 0) bounds.records = bounds.records > from ? bounds.records - from : 0;
    return watcher->subscribe(from, on_commit, wait, bounds);
  }

  // A step's operands are of the batch's size, not the state's, so a trace answer has bounds of
  // its own (dispute/step_trace.h), checked before it is read. A trace is evidence like a
  // snapshot: one the provider fails to deliver (an internal error, a broken or silent
  // connection) until --evidence-timeout has passed is withheld.
  Result<Bytes> step_trace(std::uint64_t epoch, std::uint64_t step,
                           std::optional<std::uint64_t> call) override {
    const std::uint64_t bound = call ? dispute::kMaxValuesText : dispute::kMaxTraceText;
    const std::string what = (call ? "the answer for call " + std::to_string(*call) + " of"
                                   : std::string("the trace of")) +
                             " step " + std::to_string(step) + " of epoch " + std::to_string(epoch);
    VT_ASSIGN_OR_RETURN(Bytes answer, until_withheld(what, [&] {
                          return client_.get_trace(epoch, step, call, bound, evidence_timeout_);
                        }));
    fetched_ += answer.size();
    return answer;
  }

  Result<std::string> task_json() override {
    VT_ASSIGN_OR_RETURN(Bytes task, client_.get_task());
    return std::string(task.begin(), task.end());
  }

  Result<std::vector<SignedRecord>> log() override {
    VT_RETURN_IF_ERROR(check_limited());
    return until_withheld("the commitment log", [&] { return client_.get_log(0, limits_.log); });
  }

  Result<std::optional<SignedRecord>> first_record() override {
    VT_RETURN_IF_ERROR(check_limited());
    LogBounds head(1, limits_.log.record_bytes);
    head.head_only = true;
    VT_ASSIGN_OR_RETURN(
        std::vector<SignedRecord> records,
        until_withheld("the commitment log", [&] { return client_.get_log(0, head); }));
    if (records.empty()) return std::optional<SignedRecord>();
    return std::optional<SignedRecord>(std::move(records.front()));
  }

  Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                         const std::optional<std::pair<Digest, ByteSpan>>& base) override {
    return until_withheld("the epoch " + std::to_string(epoch) + " snapshot",
                          [&] { return fetch_snapshot(epoch, root, base); });
  }

  void set_limits(const SourceLimits& limits) override {
    limits_ = limits;
    limited_ = true;
    // Kept in the config too, so a connection made after a broken transfer keeps the bound.
    config_.max_snapshot_bytes = limits.snapshot_bytes;
    client_.set_max_snapshot_bytes(limits.snapshot_bytes);
  }

  std::uint64_t bytes_fetched() const override { return fetched_; }
  std::string describe() const override { return "provider " + where_; }

 private:
  template <typename Fetch>
  auto until_withheld(const std::string& what, const Fetch& fetch) -> decltype(fetch()) {
    const Activity reading("reading " + what + " from provider " + where_);
    const auto deadline = std::chrono::steady_clock::now() + evidence_timeout_;
    for (;;) {
      auto got = fetch();
      if (got.ok() || got.error().code != Errc::kIo) return got;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        return rejected(what + " is withheld: not delivered within --evidence-timeout " +
                        std::to_string(evidence_timeout_.count() / 1000) + " s (" +
                        got.error().message + ")");
      }
      // A broken connection cannot be reused; wait a little, bounded by the deadline, and
      // reconnect.
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(std::chrono::seconds(1), deadline - now));
      auto fresh = Client::connect(config_);
      if (fresh) client_ = std::move(*fresh);
    }
  }

  Result<Bytes> fetch_snapshot(std::uint64_t epoch, const Digest& root,
                               const std::optional<std::pair<Digest, ByteSpan>>& base) {
    SnapshotRequest request;
    request.epoch = epoch;
    request.root = root;
    if (base) {
      request.codec = comp::Codec::kDelta;
      request.base = base->second;
      request.base_root = base->first;
    }
    std::uint64_t size = 0;
    auto bytes = client_.get_snapshot(request, [&](const SnapshotProgress& p) {
      size = p.total;
      return true;
    });
    fetched_ += size;
    if (!bytes)
      return bytes.error().context("epoch " + std::to_string(epoch) + " snapshot from " + where_);
    return bytes;
  }

  Status check_limited() const {
    if (limited_) return {};
    return internal_error("the log of " + where_ + " was asked for before the task bounded it");
  }

  Client client_;
  ClientConfig config_;
  std::string where_;
  std::chrono::milliseconds evidence_timeout_;
  SourceLimits limits_;
  bool limited_ = false;
  std::uint64_t fetched_ = 0;
};

// Whether `host:port` accepts a TCP connection within about a second (nothing is sent).
bool accepts_connections(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.get() < 0) continue;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
      accepted = true;
      break;
    }
    if (errno != EINPROGRESS) continue;
    pollfd p{fd.get(), POLLOUT, 0};
    int error = 0;
    socklen_t size = sizeof error;
    accepted = ::poll(&p, 1, 1000) == 1 &&
               ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
  }
  ::freeaddrinfo(found);
  return accepted;
}

}  // namespace

Result<std::unique_ptr<EvidenceSource>> open_provider_source(
    const ClientConfig& config, std::chrono::milliseconds evidence_timeout,
    std::chrono::steady_clock::time_point wait_until,
    const std::function<void(const std::string&)>& notice) {
  using Clock = std::chrono::steady_clock;
  const std::string where = config.host + ":" + std::to_string(config.port);
  Clock::time_point next_notice = Clock::now();
  while (Clock::now() < wait_until && !accepts_connections(config.host, config.port)) {
    if (notice && Clock::now() >= next_notice) {
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(wait_until - Clock::now());
      notice("nothing accepts connections at " + where + " yet; retrying every 0.1 s for " +
             std::to_string(left.count()) + " s more (--evidence-timeout) while the provider " +
             "starts (train --serve)");
      next_notice = Clock::now() + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto client = Client::connect(config);
  if (!client) {
    // Never reached, or its hello was refused or malformed: nothing could be judged yet, so
    // there is nothing to sign a rejection about (exit 3). Only the caller's own settings (no
    // pin, an unreadable CA file, --insecure to a remote host) stay input errors (exit 2).
    // Connection errors name the address already; the others get it once.
    Error e = client.error();
    if (e.message.rfind("connecting to " + where, 0) != 0) e = e.context("connecting to " + where);
    if (e.code == Errc::kRejected) {
      e.code = Errc::kIo;
      e.message += " (the provider's hello is unusable: nothing could be judged)";
    }
    return e;
  }
  return std::unique_ptr<EvidenceSource>(
      std::make_unique<ProviderSource>(std::move(*client), config, where, evidence_timeout));
}

}  // namespace vt::verifier
