#pragma once
// Where a verifier or auditor gets a provider's artifacts: its workdir (offline, auditors) or
// its service over TLS. Every snapshot a source returns has been checked against the Merkle root
// the caller asked for; a source never vouches for anything else. Evidence the provider does not
// deliver (a file its workdir lacks; a transfer past the evidence timeout) is Errc::kRejected,
// "withheld": Errc::kIo from a source means the verifier's own side failed.

#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/log.h"
#include "protocol/task.h"

namespace vt::verifier {

class ScratchFolder;

// A state this large (canonical bytes) is kept out of memory where a verifier can: on disk in
// its scratch folder between the fetch and its use, and fetched after its replay rather than
// beside it. Below, the disk would cost more than the memory saves.
inline constexpr std::uint64_t kLargeStateBytes = std::uint64_t{64} << 20;

struct SourceLimits {
  LogBounds log;  // the task's epochs + 1 records, each of what its records can take
  std::uint64_t snapshot_bytes = std::uint64_t{64} << 30;  // canonical bytes of one snapshot
};

// What `task` alone bounds, before its model is built: epochs + 1 records of at most
// kMaxRecordBytes each. check_log tightens both bounds once the task's state is known.
SourceLimits limits_for(const Task& task);

class EvidenceSource {
 public:
  virtual ~EvidenceSource() = default;
  virtual Result<std::string> task_json() = 0;
  // The whole log, read within the limits (set_limits must come first: a source refuses to
  // read a log it cannot bound).
  virtual Result<std::vector<SignedRecord>> log() = 0;
  // The log's first record alone, read no further (nullopt: the log is empty): what a verifier
  // matches its arithmetic environment to before anything else runs.
  virtual Result<std::optional<SignedRecord>> first_record();
  // Canonical bytes of the snapshot committed for `epoch` with `root`. `base` (the bytes of a
  // snapshot the caller already holds) lets a network source fetch a delta instead.
  virtual Result<Bytes> snapshot(std::uint64_t epoch, const Digest& root,
                                 const std::optional<std::pair<Digest, ByteSpan>>& base) = 0;
  // What the task implies a provider may send: more records, a longer record, or a snapshot
  // declared or decoded larger, is refused as the provider's fault before it is allocated.
  virtual void set_limits(const SourceLimits& limits) { (void)limits; }
  virtual std::uint64_t bytes_fetched() const = 0;  // on the wire, or read from disk
  virtual std::string describe() const = 0;         // for reports: "workdir /x" or "provider h:p"
  // Calls on_commit with each durable record of epoch >= from as it appears, until on_commit
  // returns false; fails when nothing new arrives within `wait`. Network sources only.
  virtual Status follow(std::uint64_t from,
                        const std::function<bool(const SignedRecord&)>& on_commit,
                        std::chrono::milliseconds wait) {
    (void)from, (void)on_commit, (void)wait;
    return invalid_input("--online needs a provider (--provider HOST:PORT), not a workdir");
  }
  // The provider's answer for one step (docs/dispute.md): its signed trace of step `step` of
  // `epoch`, or with `call` its values of that call, as it sent them (unchecked). Network
  // sources only: a workdir cannot answer for its provider.
  virtual Result<Bytes> step_trace(std::uint64_t epoch, std::uint64_t step,
                                   std::optional<std::uint64_t> call) {
    (void)epoch, (void)step, (void)call;
    return invalid_input(describe() + " cannot answer for its provider: give the provider's " +
                         "answers (veritrain trace) as --provider-trace and --provider-values");
  }
};

Result<std::unique_ptr<EvidenceSource>> open_workdir_source(const std::filesystem::path& workdir);

// The caller pairs a task with a workdir. A workdir whose own task.json is another task is a
// mismatch of the caller's inputs (Errc::kInvalidInput, exit 2: nothing of this task is there to
// judge) — unless `provider_key` is pinned and that key signed the workdir's log: then the
// provider delivered work for another task under its own signature, which the verifier's checks
// reject, naming both tasks. A workdir that names this task but commits to another, or holds a
// task.json that does not parse, is the provider's to answer for too.
Status check_workdir_task(EvidenceSource& workdir, const Task& task,
                          const std::filesystem::path& where,
                          const std::optional<std::string>& provider_key = std::nullopt);

// Whether `key` (a PublicKey fingerprint) signed `records` as a valid chain for the task its
// first record names.
bool signed_by(const std::vector<SignedRecord>& records, const std::string& key);

// `inner`, except that asking again for the snapshot it returned last is answered without a
// fetch (the state after a challenged epoch is the state before the next, and the final model
// the state after the last). With `scratch`, a snapshot of `on_disk_from` bytes or more waits in
// a file there, not in memory. `inner` must outlive it.
std::unique_ptr<EvidenceSource> reuse_last_snapshot(EvidenceSource& inner,
                                                    std::shared_ptr<ScratchFolder> scratch = {},
                                                    std::uint64_t on_disk_from = 0);

}  // namespace vt::verifier

#include "protocol/net/connection.h"

namespace vt::verifier {

// A provider's service over TLS (or plain TCP on loopback). Snapshots are fetched as deltas
// against the epoch before when the caller holds it. Failing to connect is an I/O error (the
// provider was never reached); once connected, the log or a snapshot not delivered within
// `evidence_timeout` (retrying on fresh connections) is withheld: Errc::kRejected.
inline constexpr std::chrono::milliseconds kDefaultEvidenceTimeout{std::chrono::minutes(10)};
// `wait_until`: a provider that is still starting is waited for until then (its port polled
// until it accepts connections); the default does not wait. While it waits, `notice` hears what
// it waits for and how long it will go on, at once and every 10 s, so nobody stares at silence.
Result<std::unique_ptr<EvidenceSource>> open_provider_source(
    const ClientConfig& config,
    std::chrono::milliseconds evidence_timeout = kDefaultEvidenceTimeout,
    std::chrono::steady_clock::time_point wait_until = {},
    const std::function<void(const std::string&)>& notice = nullptr);

}  // namespace vt::verifier
