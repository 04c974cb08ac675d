// Log files: reading, verifying, and the durable append-only writer.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/file_io.h"
#include "protocol/log.h"

namespace vt {
namespace fs = std::filesystem;
namespace {

std::string locate(std::string_view where, std::uint64_t epoch, std::uint64_t line,
                   std::uint64_t offset) {
  std::string out = std::string(where) + ": epoch " + std::to_string(epoch);
  if (line != 0)
    out += " (line " + std::to_string(line) + ", offset " + std::to_string(offset) + ")";
  return out;
}

Status truncate_durably(const fs::path& path, std::uint64_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return io_error(errno_text(errno, "opening", path));
  Status status;
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    status = io_error(errno_text(errno, "truncating", path));
  } else if (::fsync(fd) != 0) {
    status = io_error(errno_text(errno, "syncing", path));
  }
  ::close(fd);
  return status;
}

}  // namespace

Result<LogFile> read_log(ByteSpan bytes, std::string_view where) {
  LogFile out;
  std::uint64_t pos = 0;
  while (pos < bytes.size()) {
    std::uint64_t epoch = out.records.size();
    const std::uint8_t* start = bytes.data() + pos;
    const void* newline = std::memchr(start, '\n', bytes.size() - pos);
    if (newline == nullptr) {
      out.torn_tail = TornTail{pos, bytes.size() - pos, epoch};
      break;
    }
    std::uint64_t end = static_cast<const std::uint8_t*>(newline) - bytes.data() + 1;
    VT_ASSIGN_OR_RETURN(SignedRecord record, decode_record(bytes.subspan(pos, end - pos),
                                                           locate(where, epoch, epoch + 1, pos)));
    record.offset = pos;
    record.line = epoch + 1;
    out.records.push_back(std::move(record));
    pos = end;
  }
  return out;
}

Result<LogFile> read_log(const fs::path& path, std::uint64_t max_bytes) {
  VT_ASSIGN_OR_RETURN(Bytes bytes, read_file(path, max_bytes));
  return read_log(bytes, path.string());
}

Result<LogCheck> verify_log(const std::vector<SignedRecord>& records, const Digest& task_id,
                            const std::optional<PublicKey>& signer, std::string_view where) {
  LogCheck check;
  std::optional<PublicKey> expected = signer;
  for (std::uint64_t epoch = 0; epoch < records.size(); ++epoch) {
    const SignedRecord& r = records[epoch];
    VT_RETURN_IF_ERROR(verify_record(r, epoch, task_id, check.head, expected,
                                     locate(where, epoch, r.line, r.offset)));
    // One signer throughout: whoever signed epoch 0 must sign every later epoch.
    if (!expected) expected = *PublicKey::from_raw(r.record.signer);
    check.head = r.hash;
  }
  check.records = records.size();
  if (expected && !records.empty()) check.signer_fingerprint = expected->fingerprint();
  return check;
}

Result<CommitLog> CommitLog::open(const fs::path& path, const Digest& task_id, LogMode mode,
                                  const std::optional<PublicKey>& signer) {
  CommitLog log;
  log.path_ = path;
  log.task_id_ = task_id;
  log.mode_ = mode;
  std::error_code ec;
  if (mode == LogMode::kAppend && !fs::exists(path, ec) && !ec) return log;
  VT_ASSIGN_OR_RETURN(LogFile file, read_log(path));
  VT_ASSIGN_OR_RETURN(LogCheck check, verify_log(file.records, task_id, signer, path.string()));
  (void)check;
  log.records_ = std::move(file.records);
  log.size_ = log.records_.empty()
                  ? 0
                  : log.records_.back().offset + encode_record(log.records_.back()).size();
  log.torn_tail_ = file.torn_tail;
  if (const auto& torn = log.torn_tail_) {
    std::string what = std::to_string(torn->size) + " bytes at offset " +
                       std::to_string(torn->offset) + ", epoch " + std::to_string(torn->epoch);
    if (mode == LogMode::kAppend) {
      // The append that wrote it never returned, so nothing was ever told this epoch is
      // committed: cutting it loses no commitment, and the epoch is committed again.
      VT_RETURN_IF_ERROR(truncate_durably(path, torn->offset));
      log.notice_ = path.string() + ": cut off an incomplete final record (" + what +
                    "): the writer stopped while appending it";
    } else {
      log.notice_ = path.string() + ": ends with an incomplete record (" + what +
                    "): a crash during append, or an append in progress";
    }
  }
  return log;
}

Result<SignedRecord> CommitLog::append(CommitRecord record, const SigningKey& key) {
  std::string where = path_.string() + ": cannot append epoch " + std::to_string(record.epoch);
  if (mode_ != LogMode::kAppend) return invalid_input(where + ": the log was opened read-only");
  if (record.epoch != next_epoch()) {
    return invalid_input(where + ": the next epoch of this log is " + std::to_string(next_epoch()));
  }
  if (record.task_id == Digest{}) record.task_id = task_id_;
  if (record.task_id != task_id_) {
    return invalid_input(where + ": the record is for task " + hex_encode(record.task_id) +
                         ", the log for task " + hex_encode(task_id_));
  }
  if (!records_.empty() && key.public_key().raw() != records_.front().record.signer) {
    return invalid_input(where + ": signing key " + key.public_key().fingerprint() +
                         " is not the key that signed epoch 0 of this log");
  }
  record.prev = head();
  if (record.time.empty()) record.time = utc_now_iso8601();
  auto signed_record = sign_record(std::move(record), key);
  if (!signed_record) return signed_record.error().context(where);
  SignedRecord out = std::move(signed_record).value();
  Bytes line = encode_record(out);
  bool creating = size_ == 0 && !fs::exists(path_);
  VT_RETURN_IF_ERROR(append_durable(path_, line));
  out.offset = size_;
  out.line = records_.size() + 1;
  size_ += line.size();
  records_.push_back(out);
  // A new file's name is only durable once its folder is synced.
  if (creating) VT_RETURN_IF_ERROR(fsync_dir(path_.parent_path()));
  return out;
}

}  // namespace vt
