#pragma once
// The commitment log (docs/log.md): one signed, hash-chained record per epoch, append-only.
//
// A log file is a sequence of lines, one per epoch starting at 0:
//
//   BODY 0x09 SIGNATURE 0x0A
//
// BODY is the record's canonical JSON (sorted keys, no whitespace, so it never holds a raw tab
// or newline); SIGNATURE is the Ed25519 signature over exactly the BODY bytes, as 128
// lower-case hex digits. The record hash - what the next record's "prev" names - is the
// SHA-256 of the whole line, from its first byte through the 0x0A. So `openssl pkeyutl` checks
// a signature and `hashlib.sha256(line)` checks the chain without re-serializing any JSON.

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bytes.h"
#include "protocol/environment.h"
#include "protocol/keys.h"

namespace vt {

inline constexpr std::string_view kCommitFormat = "veritrain.commit.v1";
inline constexpr std::uint64_t kMaxRecordBytes = std::uint64_t{64} << 20;

// The held-out split evaluated at the end of an epoch (docs/datasets.md, "Held-out evaluation").
struct EvalClaim {
  double loss = 0.0;               // mean over the split; NaN is stored as null
  std::optional<double> accuracy;  // classification only
  std::uint64_t examples = 0;
};

struct CommitMetrics {
  double loss = 0.0;          // mean training loss over the epoch; NaN is stored as null
  std::uint64_t steps = 0;    // optimizer steps in the epoch
  double seconds = 0.0;       // wall time of the epoch
  std::uint64_t samples = 0;  // training samples consumed in the epoch
  // Epochs >= 1 of tasks with an eval split. Absent otherwise, and then not written at all, so
  // the records of every other task keep their bytes.
  std::optional<EvalClaim> eval;
};

// What the provider commits to at the end of an epoch (epoch 0: the initial state).
// (clang-tidy counts nlohmann::json's destructor, which frees nested values through a vector it
// allocates, as a throw in the implicit noexcept members of this struct and of SignedRecord;
// running out of memory there ends the process, as in any destructor.)
struct CommitRecord {  // NOLINT(bugprone-exception-escape)
  Digest task_id{};
  std::uint64_t epoch = 0;
  Digest prev{};  // hash of the previous record's line; all zero for epoch 0
  Digest root{};  // Merkle root of the canonical snapshot bytes
  // Produced by fingerprint/; the log stores them as given and never interprets them.
  nlohmann::json fingerprint;
  nlohmann::json tracking_fingerprint;
  std::vector<nlohmann::json> trail;  // one per m steps within the epoch; may be empty
  Digest data_order_digest{};
  CommitMetrics metrics;
  // The arithmetic environment (docs/environment.md): in epoch 0's record and in the first
  // record a resumed run appends, so that a verifier sees every environment the run trained in.
  // Absent otherwise, and then not written at all.
  std::optional<Environment> environment;
  std::string time;  // UTC, "2025-06-01T12:00:00.123Z"
  Bytes signer;      // raw 32-byte Ed25519 public key
};

struct SignedRecord {  // NOLINT(bugprone-exception-escape): see CommitRecord
  CommitRecord record;
  std::string body;          // the exact signed bytes (canonical JSON)
  Bytes signature;           // 64 bytes
  Digest hash{};             // SHA-256 of the stored line including its final newline
  std::uint64_t offset = 0;  // where the line starts in its log file
  std::uint64_t line = 0;    // 1-based line number in its log file (0 when not from a file)
};

// "2025-06-01T12:00:00.123Z" for now.
std::string utc_now_iso8601();

// The canonical body of `record` (docs/log.md lists its fields).
Result<std::string> commit_body_json(const CommitRecord& record);

// Sets record.signer to `key`'s public key and signs the body. prev and epoch are the caller's.
Result<SignedRecord> sign_record(CommitRecord record, const SigningKey& key);

// The stored line of a record, newline included: the wire form too.
Bytes encode_record(const SignedRecord& record);

// Parses one line (its final newline included) and checks its form; the signature is only
// checked by verify_record. `where` prefixes errors, e.g. "log.jsonl: epoch 3 (line 4, offset
// 1234)".
Result<SignedRecord> decode_record(ByteSpan line, std::string_view where = "record");

// Checks one record in its place: the epoch, the task, the signer (when given), the signature,
// and that prev names `prev` (all zero for epoch 0).
Status verify_record(const SignedRecord& record, std::uint64_t epoch, const Digest& task_id,
                     const Digest& prev, const std::optional<PublicKey>& signer,
                     std::string_view where = "record");

// Bytes after the last newline: a record whose append was cut short by a crash. A record is
// written with one write ending in its newline, so only the final record can lack one.
struct TornTail {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t epoch = 0;  // the epoch it would have committed, by position
};

struct LogFile {
  std::vector<SignedRecord> records;
  std::optional<TornTail> torn_tail;
};

// Splits and decodes every line; a malformed complete line is an error naming its epoch,
// line and offset; an incomplete final line is reported in torn_tail.
Result<LogFile> read_log(ByteSpan bytes, std::string_view where = "log");
// A file larger than `max_bytes` is refused before it is read (a reader that knows the task
// passes (epochs + 1) × kMaxRecordBytes).
Result<LogFile> read_log(const std::filesystem::path& path,
                         std::uint64_t max_bytes = std::uint64_t{1} << 40);

struct LogCheck {
  std::uint64_t records = 0;
  Digest head{};                   // hash of the last record; all zero for an empty log
  std::string signer_fingerprint;  // PublicKey::fingerprint() of the signer; empty if no records
};

// Every record's signature, the chain, the task binding, epochs 0, 1, 2, ... without gaps and
// one signer throughout (`signer` when given, else epoch 0's). Stops at the first problem.
Result<LogCheck> verify_log(const std::vector<SignedRecord>& records, const Digest& task_id,
                            const std::optional<PublicKey>& signer = std::nullopt,
                            std::string_view where = "log");

// What a reader holds a provider's log to while it reads (docs/reliability.md, "A log is read
// within the task's bounds"), so that it stops at the first record that cannot belong to the
// task instead of holding whatever arrives: at most `records` records (a task commits epochs + 1),
// each line at most `record_bytes` (what the task's fingerprints and environment can take), and
// epochs in order, each chained to the one before and signed by the log's key, the first
// record's signer. Which task a record names, and whose key that is, are the caller's to judge
// (verify_log, the pinned provider key): they are bounded here by everything else.
struct LogBounds {
  LogBounds(std::uint64_t most_records = std::numeric_limits<std::uint64_t>::max(),
            std::uint64_t most_record_bytes = kMaxRecordBytes)
      : records(most_records), record_bytes(most_record_bytes) {}
  std::uint64_t records;
  std::uint64_t record_bytes;
  // Reaching `records` ends the read with what it holds (the head of a log) rather than
  // rejecting a provider that sends more.
  bool head_only = false;
};

class LogStreamCheck {
 public:
  explicit LogStreamCheck(LogBounds bounds, std::uint64_t first_epoch = 0)
      : bounds_(bounds), first_(first_epoch), next_(first_epoch) {}
  // Before a line of `bytes` bytes (newline included) is parsed: the count, then the size.
  Status admit(std::uint64_t bytes, std::string_view where) const;
  // After it is parsed: its epoch, its signature under the log's key, and the chain.
  Status accept(const SignedRecord& record, std::string_view where);
  std::uint64_t next_epoch() const { return next_; }
  // Whether the bounds' records are all read (the end of a head_only read).
  bool full() const { return next_ - first_ >= bounds_.records; }

 private:
  LogBounds bounds_;
  std::uint64_t first_, next_;
  std::optional<PublicKey> signer_;
  Digest prev_{};
};

// "epoch 5 (line 6)": where a record of a log read from its start stands.
std::string log_position(std::uint64_t epoch);

enum class LogMode { kReadOnly, kAppend };

// A verified log file. In kAppend mode a torn tail is cut off on open (notice() says so) and
// the file is created by the first append. One writer at a time; not thread-safe.
class CommitLog {
 public:
  static Result<CommitLog> open(const std::filesystem::path& path, const Digest& task_id,
                                LogMode mode,
                                const std::optional<PublicKey>& signer = std::nullopt);

  // Appends the next epoch durably. Fills task_id (if zero), prev, signer and time (if empty);
  // refuses an epoch other than next_epoch() and a key other than the log's signer.
  Result<SignedRecord> append(CommitRecord record, const SigningKey& key);

  const std::vector<SignedRecord>& records() const { return records_; }
  std::uint64_t next_epoch() const { return records_.size(); }
  Digest head() const { return records_.empty() ? Digest{} : records_.back().hash; }
  const std::optional<TornTail>& torn_tail() const { return torn_tail_; }
  const std::string& notice() const { return notice_; }  // empty unless open() recovered
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  Digest task_id_{};
  LogMode mode_ = LogMode::kReadOnly;
  std::vector<SignedRecord> records_;
  std::uint64_t size_ = 0;  // bytes of whole records in the file: where the next one starts
  std::optional<TornTail> torn_tail_;
  std::string notice_;
};

}  // namespace vt
